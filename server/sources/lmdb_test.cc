#include "server/sources/lmdb.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "absl/strings/str_cat.h"
#include "server/lmdb_env.h"
#include "server/sample_source.h"
#include "server/sources/source.h"
#include "tests/testdata.h"

namespace stoker {
namespace {
namespace fs = std::filesystem;

// An LMDB dataset is mapped read-only from its confined data file: no lock
// file is created (the folder may be read-only), none is followed.
TEST(LmdbDatasetTest, OpensWithoutALockFile) {
  std::string root = testdata::MakeTempDir("lmdb-nolock");
  {
    LmdbEnv::Options w;
    w.read_only = false;
    w.map_bytes = 1 << 20;
    auto env = LmdbEnv::Open(root, w);
    ASSERT_TRUE(env.ok()) << env.status();
    ASSERT_TRUE((*env)->WriteTxn([](MDB_txn* txn, MDB_dbi dbi) {
      std::string k = "cls/a", v = "bytes";
      MDB_val key{k.size(), k.data()}, val{v.size(), v.data()};
      return LmdbStatus(mdb_put(txn, dbi, &key, &val, 0), "put");
    }).ok());
  }
  fs::remove(root + "/lock.mdb");
  // A lock file that is a symlink to something else is never touched.
  fs::create_symlink(root + "/elsewhere", root + "/lock.mdb");
  auto ds = LoadLmdbDataset(root, "");
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->samples.size(), 1u);
  EXPECT_FALSE(fs::exists(root + "/elsewhere"));
  std::string value;
  ASSERT_TRUE(ds->source->Read("cls/a", &value, nullptr).ok());
  EXPECT_EQ(value, "bytes");
  EXPECT_FALSE(ds->source->Versioned());
  // Entries are keyed by the data file's identity and the key.
  auto key = ds->source->Identify("cls/a");
  ASSERT_TRUE(key.ok()) << key.status();
  const FileVersion data = *FileSystem::Default()->Stat(root + "/data.mdb");
  EXPECT_EQ(key->file, absl::StrCat("lmdb:", data.device, ":", data.inode, ":", data.size, ":",
                                    data.mtime_ns, ":cls/a"));
  // Through the registry, confined to the folder the caller proved: named
  // by its folder or by its data file (whose folder is the one proved).
  auto in = std::make_shared<Beneath>();
  in->dir_fd = open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  in->prefix = root;
  SourceContext ctx;
  ctx.beneath = in;
  v1::DatasetSpec spec;
  for (const std::string& path : {root, root + "/", root + "/data.mdb"}) {
    spec.mutable_lmdb()->set_path(path);
    auto opened = OpenDataset(spec, ctx);
    ASSERT_TRUE(opened.ok()) << path << ": " << opened.status();
    ASSERT_TRUE(opened->source->Read("cls/a", &value, nullptr).ok());
    EXPECT_EQ(value, "bytes");
  }
  // The data file must be a regular file.
  fs::remove(root + "/data.mdb");
  ASSERT_EQ(mkfifo((root + "/data.mdb").c_str(), 0644), 0);
  EXPECT_EQ(LoadLmdbDataset(root, "").status().code(), absl::StatusCode::kFailedPrecondition);
  fs::remove_all(root);
}

}  // namespace
}  // namespace stoker
