// The source registry: every source the spec can name has exactly one
// unit, and what the client and the daemon derive from a spec (its path,
// the folder a caller proves) is read from the schema, not the kind.
#include <sys/stat.h>

#include <filesystem>
#include <set>
#include <string>

#include "gtest/gtest.h"
#include "proto/spec_util.h"
#include "server/sources/source.h"
#include "tests/testdata.h"

namespace stoker {
namespace {
namespace fs = std::filesystem;

TEST(SourceRegistryTest, EverySourceCaseOfTheSpecHasOneUnit) {
  const google::protobuf::OneofDescriptor* oneof =
      v1::DatasetSpec::descriptor()->FindOneofByName("source");
  ASSERT_NE(oneof, nullptr);
  std::set<int> registered;
  for (const SourceKind* k : AllSources()) {
    EXPECT_TRUE(registered.insert(k->source_case()).second)
        << "registered twice: " << k->source_case();
  }
  for (int i = 0; i < oneof->field_count(); ++i) {
    const int number = oneof->field(i)->number();
    EXPECT_EQ(registered.count(number), 1u) << oneof->field(i)->name() << " has no unit";
    // Every source message names what it reads by a string: a local
    // `path`, or an object store's `url`.
    const google::protobuf::Descriptor* m = oneof->field(i)->message_type();
    ASSERT_NE(m, nullptr);
    const google::protobuf::FieldDescriptor* path = m->FindFieldByName("path");
    if (path == nullptr) path = m->FindFieldByName("url");
    ASSERT_NE(path, nullptr) << m->full_name() << " has no path or url";
    EXPECT_EQ(path->type(), google::protobuf::FieldDescriptor::TYPE_STRING);
  }
  EXPECT_EQ(registered.size(), static_cast<size_t>(oneof->field_count()));
  EXPECT_EQ(FindSource(v1::DatasetSpec::SOURCE_NOT_SET), nullptr);
  // The names, from the schema: adding a kind changes no test here.
  std::string names;
  for (int i = 0; i < oneof->field_count(); ++i) {
    names += i == 0 ? "" : i + 1 == oneof->field_count() ? " or " : ", ";
    names += oneof->field(i)->name();
  }
  EXPECT_EQ(DatasetSourceNames(), names);
}

TEST(SourceRegistryTest, NoSourceIsInvalid) {
  absl::StatusOr<Dataset> ds = OpenDataset(v1::DatasetSpec(), SourceContext());
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(ds.status().message().find(DatasetSourceNames()), std::string::npos) << ds.status();
}

// The folder a caller proves: `root` when the source has one, the folder a
// file is in, else the path itself.
TEST(SourceRegistryTest, DatasetFolderFollowsThePathNotTheKind) {
  const std::string dir = testdata::MakeTempDir("dataset-folder");
  fs::create_directories(dir + "/images");
  ASSERT_TRUE(testdata::WriteFile(dir + "/train.tsv", "a.jpg\t0\n").ok());
  ASSERT_TRUE(testdata::WriteFile(dir + "/x.npy", "not read").ok());
  v1::DatasetSpec ds;
  EXPECT_EQ(DatasetPath(ds), "");
  ds.mutable_folder()->set_path(dir + "/images/");
  EXPECT_EQ(DatasetPath(ds), dir + "/images/");
  EXPECT_EQ(DatasetFolder(ds), dir + "/images");
  ds.mutable_list()->set_path(dir + "/train.tsv");
  EXPECT_EQ(DatasetFolder(ds), dir);
  ds.mutable_list()->set_root(dir + "/images");
  EXPECT_EQ(DatasetFolder(ds), dir + "/images");
  ds.mutable_npy()->set_path(dir + "/x.npy");
  EXPECT_EQ(DatasetFolder(ds), dir);
  ds.mutable_hdf5()->set_path(dir + "/images");
  EXPECT_EQ(DatasetFolder(ds), dir + "/images");
  // A path that does not exist: itself, which the client then fails to
  // open, naming it.
  ds.mutable_lmdb()->set_path(dir + "/missing.mdb");
  EXPECT_EQ(DatasetFolder(ds), dir + "/missing.mdb");
  ds.mutable_lmdb()->set_path(dir + "/x.npy");
  EXPECT_EQ(DatasetFolder(ds), dir);
  ds.mutable_lmdb()->set_path("/");
  EXPECT_EQ(DatasetFolder(ds), "/");
  fs::remove_all(dir);
  // An object store's dataset names no local folder: nothing to prove.
  ds.mutable_s3()->set_url("s3://bucket/train/");
  EXPECT_EQ(DatasetFolder(ds), "");
}

}  // namespace
}  // namespace stoker
