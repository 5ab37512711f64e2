#include "server/sources/files/lmdb.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "absl/strings/str_cat.h"
#include "server/cache/lmdb_env.h"
#include "server/dataset/sample_source.h"
#include "server/sources/source.h"
#include "tests/testdata.h"
#include "util/cache_key.h"

namespace stoker {
namespace {
namespace fs = std::filesystem;

// Writes `entries` into a new environment in folder `root`.
absl::Status WriteEnv(const std::string& root,
                      const std::vector<std::pair<std::string, std::string>>& entries) {
  LmdbEnv::Options w;
  w.read_only = false;
  w.map_bytes = 64 << 20;
  auto env = LmdbEnv::Open(root, w);
  if (!env.ok()) return env.status();
  return (*env)->WriteTxn([&](MDB_txn* txn, MDB_dbi dbi) {
    for (const auto& [k, v] : entries) {
      MDB_val key{k.size(), const_cast<char*>(k.data())}, val{v.size(), const_cast<char*>(v.data())};
      absl::Status s = LmdbStatus(mdb_put(txn, dbi, &key, &val, 0), "put");
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  });
}

// A data file cut short under the walk of its keys (its owner may truncate
// it at any time) is DATA_LOSS for that dataset, not a SIGBUS.
TEST(LmdbDatasetTest, KeysOfATruncatedFileAreAnError) {
  std::string root = testdata::MakeTempDir("lmdb-cut");
  std::vector<std::pair<std::string, std::string>> entries;
  for (int i = 0; i < 20000; ++i) {
    entries.emplace_back(absl::StrCat("cls/", 100000 + i), std::string(200, static_cast<char>(i)));
  }
  ASSERT_TRUE(WriteEnv(root, entries).ok());
  const std::string data = root + "/data.mdb";
  int fd = open(data.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  LmdbEnv::Options r;
  r.read_only = true;
  r.data_fd = fd;
  auto env = LmdbEnv::Open(data, r);
  ASSERT_TRUE(env.ok()) << env.status();
  size_t keys = 0;
  ASSERT_TRUE((*env)->ForEachKey([&](absl::string_view) { return ++keys > 0; }).ok());
  EXPECT_EQ(keys, 20000u);
  ASSERT_EQ(truncate(data.c_str(), 16384), 0);
  keys = 0;
  absl::Status s = (*env)->ForEachKey([&](absl::string_view) { return ++keys > 0; });
  EXPECT_FALSE(s.ok());
  EXPECT_LT(keys, 20000u);
  std::string value;
  EXPECT_FALSE((*env)->Get("cls/119999", &value).ok());
  close(fd);
  fs::remove_all(root);
}

// An LMDB dataset is mapped read-only from its confined data file: no lock
// file is created (the folder may be read-only), none is followed.
TEST(LmdbDatasetTest, OpensWithoutALockFile) {
  std::string root = testdata::MakeTempDir("lmdb-nolock");
  ASSERT_TRUE(WriteEnv(root, {{"cls/a", "bytes"}}).ok());
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
  const FileVersion data = (*FileSystem::Default()->Open(root + "/data.mdb"))->version();
  EXPECT_EQ(key->file, CacheKey({"lmdb", data.device, data.inode, data.size,
                                  uint64_t(data.mtime_ns), uint64_t(data.ctime_ns), "cls/a"}));
  // A value over the per-file cap is refused before it is copied.
  ScanLimits small;
  small.max_file_bytes = 4;
  auto capped = LoadLmdbDataset(root, "", small);
  ASSERT_TRUE(capped.ok()) << capped.status();
  absl::Status big = capped->source->Read("cls/a", &value, nullptr);
  EXPECT_EQ(big.code(), absl::StatusCode::kResourceExhausted) << big;
  EXPECT_NE(big.message().find("5-byte value"), std::string::npos) << big;
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
