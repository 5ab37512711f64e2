#include "server/cache/lmdb_env.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "util/status_macros.h"
#include "util/mapped_read.h"

namespace stoker {

absl::Status LmdbStatus(int rc, absl::string_view what) {
  if (rc == MDB_SUCCESS) return absl::OkStatus();
  std::string msg = absl::StrCat(what, ": ", mdb_strerror(rc));
  if (rc == MDB_NOTFOUND) return absl::NotFoundError(msg);
  if (rc == MDB_MAP_FULL) return absl::ResourceExhaustedError(msg);
  if (rc == MDB_INVALID || rc == MDB_CORRUPTED || rc == MDB_VERSION_MISMATCH)
    return absl::DataLossError(msg);
  if (rc > 0) return ErrnoStatus(rc, std::string(what));
  return absl::InternalError(msg);
}

absl::StatusOr<std::unique_ptr<LmdbEnv>> LmdbEnv::Open(const std::string& path,
                                                       const Options& options) {
  const std::string what = absl::StrCat("LMDB ", path);
  std::error_code ec;
  if (options.data_fd >= 0) {
    if (!options.read_only) return absl::InvalidArgumentError("data_fd is for read-only envs");
  } else if (options.read_only) {
    if (!std::filesystem::exists(path, ec)) {
      return absl::NotFoundError(absl::StrCat(what, " does not exist"));
    }
  } else {
    // A folder made here is the daemon's alone; its files are 0600 too.
    if (std::filesystem::create_directories(path, ec)) {
      std::filesystem::permissions(path, std::filesystem::perms::owner_all, ec);
    }
    if (ec) return absl::PermissionDeniedError(absl::StrCat(what, ": ", ec.message()));
  }
  MDB_env* env = nullptr;
  STOKER_RETURN_IF_ERROR(LmdbStatus(mdb_env_create(&env), what));
  auto fail = [&](int rc) {
    mdb_env_close(env);
    return LmdbStatus(rc, what);
  };
  int rc = mdb_env_set_maxreaders(env, options.max_readers);
  if (rc == 0 && options.map_bytes > 0) {
    rc = mdb_env_set_mapsize(env, options.map_bytes);
  }
  if (rc != 0) return fail(rc);
  unsigned flags = MDB_NOTLS;
  if (options.read_only) {
    flags |= MDB_RDONLY;
  } else {
    // A cache: losing the last transactions in an OS crash is fine, a
    // corrupt environment is not (MDB_NOSYNC could give one).
    flags |= MDB_NOMETASYNC;
  }
  std::string open_path = path;
  if (options.data_fd >= 0) {
    open_path = absl::StrCat("/proc/self/fd/", options.data_fd);
    flags |= MDB_NOSUBDIR | MDB_NOLOCK;
  } else if (!std::filesystem::is_directory(path, ec)) {
    flags |= MDB_NOSUBDIR;
  }
  rc = mdb_env_open(env, open_path.c_str(), flags, 0600);
  if (rc != 0) return fail(rc);
  MDB_txn* txn = nullptr;
  rc = mdb_txn_begin(env, nullptr, options.read_only ? MDB_RDONLY : 0, &txn);
  if (rc != 0) return fail(rc);
  MDB_dbi dbi;
  rc = mdb_dbi_open(txn, nullptr, 0, &dbi);
  if (rc != 0) {
    mdb_txn_abort(txn);
    return fail(rc);
  }
  rc = mdb_txn_commit(txn);
  if (rc != 0) return fail(rc);
  return std::unique_ptr<LmdbEnv>(new LmdbEnv(path, env, dbi, options.data_fd >= 0));
}

LmdbEnv::~LmdbEnv() { mdb_env_close(env_); }

absl::Status LmdbEnv::View(
    absl::string_view key, const std::function<void(absl::string_view)>& fn) const {
  MDB_txn* txn = nullptr;
  STOKER_RETURN_IF_ERROR(
      LmdbStatus(mdb_txn_begin(env_, nullptr, MDB_RDONLY, &txn), path_));
  MDB_val k{key.size(), const_cast<char*>(key.data())}, v;
  int rc = mdb_get(txn, dbi_, &k, &v);
  if (rc == 0) fn(absl::string_view(static_cast<const char*>(v.mv_data), v.mv_size));
  mdb_txn_abort(txn);
  return LmdbStatus(rc, absl::StrCat(path_, " key ", key));
}

absl::Status LmdbEnv::Get(absl::string_view key, std::string* out,
                          uint64_t max_bytes) const {
  // Another user's data file, mapped: it may shrink under the read.
  MDB_txn* txn = nullptr;
  int rc = 0;
  uint64_t too_big = 0;
  auto read = [&] {
    rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, &txn);
    if (rc != 0) return;
    MDB_val k{key.size(), const_cast<char*>(key.data())}, v;
    rc = mdb_get(txn, dbi_, &k, &v);
    if (rc != 0) return;
    if (v.mv_size > max_bytes) {
      too_big = v.mv_size;
      return;
    }
    out->assign(static_cast<const char*>(v.mv_data), v.mv_size);
  };
  absl::Status s = Reading(read);
  if (txn != nullptr) mdb_txn_abort(txn);
  STOKER_RETURN_IF_ERROR(s);
  if (too_big > 0) {
    return absl::ResourceExhaustedError(absl::StrCat(
        path_, " key ", key, ": a ", too_big, "-byte value, over the daemon's limit of ",
        max_bytes, " bytes for one sample (--max-file-bytes)"));
  }
  return LmdbStatus(rc, absl::StrCat(path_, " key ", key));
}

absl::Status LmdbEnv::ForEachKey(const std::function<bool(absl::string_view)>& fn) const {
  // Keys are at most max_key_size() bytes: a batch's arena is allocated
  // before each guarded walk, which copies into it and allocates nothing.
  constexpr size_t kBatchKeys = 4096;
  const size_t most = max_key_size();
  std::vector<char> arena(kBatchKeys * most);
  std::vector<size_t> sizes(kBatchKeys);
  MDB_txn* txn = nullptr;
  MDB_cursor* cur = nullptr;
  int rc = 0;
  MDB_cursor_op op = MDB_FIRST;
  size_t n = 0;
  auto walk = [&] {
    if (txn == nullptr) {
      rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, &txn);
      if (rc == 0) rc = mdb_cursor_open(txn, dbi_, &cur);
      if (rc != 0) return;
    }
    MDB_val k, v;
    for (n = 0; n < kBatchKeys && (rc = mdb_cursor_get(cur, &k, &v, op)) == 0; ++n) {
      op = MDB_NEXT;
      sizes[n] = std::min(k.mv_size, most);
      std::memcpy(arena.data() + n * most, k.mv_data, sizes[n]);
    }
  };
  absl::Status s;
  do {
    s = Reading(walk);
    if (!s.ok() || (rc != 0 && rc != MDB_NOTFOUND)) break;
    bool more = true;
    for (size_t i = 0; i < n && more; ++i) {
      more = fn(absl::string_view(arena.data() + i * most, sizes[i]));
    }
    if (!more) rc = MDB_NOTFOUND;  // Stopped by fn: done.
  } while (rc == 0);
  if (cur != nullptr) mdb_cursor_close(cur);
  if (txn != nullptr) mdb_txn_abort(txn);
  STOKER_RETURN_IF_ERROR(s);
  return rc == MDB_NOTFOUND ? absl::OkStatus() : LmdbStatus(rc, path_);
}

absl::Status LmdbEnv::ForEach(
    const std::function<bool(absl::string_view, absl::string_view)>& fn) const {
  MDB_txn* txn = nullptr;
  STOKER_RETURN_IF_ERROR(
      LmdbStatus(mdb_txn_begin(env_, nullptr, MDB_RDONLY, &txn), path_));
  MDB_cursor* cur = nullptr;
  int rc = mdb_cursor_open(txn, dbi_, &cur);
  if (rc == 0) {
    MDB_val k, v;
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
      if (!fn(absl::string_view(static_cast<const char*>(k.mv_data), k.mv_size),
              absl::string_view(static_cast<const char*>(v.mv_data), v.mv_size))) {
        break;
      }
    }
    if (rc == MDB_NOTFOUND) rc = 0;
    mdb_cursor_close(cur);
  }
  mdb_txn_abort(txn);
  return LmdbStatus(rc, path_);
}

absl::Status LmdbEnv::WriteTxn(
    const std::function<absl::Status(MDB_txn*, MDB_dbi)>& fn) {
  MDB_txn* txn = nullptr;
  STOKER_RETURN_IF_ERROR(LmdbStatus(mdb_txn_begin(env_, nullptr, 0, &txn), path_));
  absl::Status s = fn(txn, dbi_);
  if (!s.ok()) {
    mdb_txn_abort(txn);
    return s;
  }
  return LmdbStatus(mdb_txn_commit(txn), path_);
}

int LmdbEnv::ReaderCheck() {
  int dead = 0;
  mdb_reader_check(env_, &dead);
  return dead;
}

void LmdbEnv::Usage(uint64_t* entries, uint64_t* bytes) const {
  MDB_stat st{};
  MDB_envinfo info{};
  mdb_env_stat(env_, &st);
  mdb_env_info(env_, &info);
  *entries = st.ms_entries;
  *bytes = (static_cast<uint64_t>(info.me_last_pgno) + 1) * st.ms_psize;
}

void LmdbEnv::LiveUsage(uint64_t* entries, uint64_t* bytes) const {
  MDB_stat st{};
  mdb_env_stat(env_, &st);
  *entries = st.ms_entries;
  *bytes = (static_cast<uint64_t>(st.ms_branch_pages) + st.ms_leaf_pages +
            st.ms_overflow_pages) * st.ms_psize;
}

size_t LmdbEnv::max_key_size() const {
  return static_cast<size_t>(mdb_env_get_maxkeysize(env_));
}

}  // namespace stoker
