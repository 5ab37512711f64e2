// Daemon: what each caller may hold and see (who the caller is, and which
// files it may read, is server/access/authorizer.h): the ring and session quotas,
// other users' sessions hidden, the daemon's own files named for the guard.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "proto/spec_util.h"
#include "server/dataset/array_source.h"
#include "server/daemon/daemon.h"
#include "server/access/token.h"
#include "util/status_macros.h"

namespace stoker {
namespace {

// Sample `index`'s files: for typed arrays each array's name, shape and,
// where its file says, affine (4 x 4); else the sample's files.
void DescribeFiles(const Dataset& d, uint64_t index, v1::SampleFiles* out) {
  const Sample& s = d.samples[index];
  const ArraySource* arrays = d.source != nullptr ? d.source->arrays() : nullptr;
  if (arrays == nullptr) {
    for (size_t k = 0; k <= s.more.size(); ++k) out->add_files()->set_path(s.file(k));
    return;
  }
  for (uint32_t f = 0; f < arrays->files(); ++f) {
    v1::SampleFile* file = out->add_files();
    file->set_path(arrays->FileName(index, f));
    for (uint64_t n : arrays->shape(index)) file->add_shape(n);
    const std::vector<double> affine = arrays->Affine(index, f);
    if (affine.size() != 12) continue;
    for (double a : affine) file->add_affine(a);
    for (double a : {0.0, 0.0, 0.0, 1.0}) file->add_affine(a);
  }
}

}  // namespace

std::shared_ptr<const FileGuard> Daemon::MakeGuard() const {
  auto g = std::make_shared<FileGuard>();
  if (geteuid() != 0) g->daemon_uid = geteuid();
  struct stat st {};
  if (stat("/dev/shm", &st) == 0) g->devices.push_back(st.st_dev);
  auto add = [&](const std::string& path) {
    if (!path.empty() && stat(path.c_str(), &st) == 0) {
      g->inodes.emplace_back(st.st_dev, st.st_ino);
    }
  };
  if (!options_.l2.path.empty()) {
    add(options_.l2.path);
    add(options_.l2.path + "/data.mdb");
    add(options_.l2.path + "/lock.mdb");
  }
  if (!options_.handoff_socket.empty()) {
    const size_t slash = options_.handoff_socket.rfind('/');
    if (slash != std::string::npos && slash > 0) add(options_.handoff_socket.substr(0, slash));
  }
  return g;
}

absl::StatusOr<v1::DescribeSamplesResponse> Daemon::DescribeSamples(
    const v1::DescribeSamplesRequest& request, const Caller& caller) {
  if (request.indices_size() > 1024) {
    return absl::InvalidArgumentError("at most 1024 indices per call");
  }
  std::shared_ptr<const Dataset> dataset;
  {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(request.session_id());
    if (it == sessions_.end()) {
      return absl::NotFoundError(absl::StrCat("no session ", request.session_id()));
    }
    if (!caller.admin && it->second.owner_uid != caller.uid) {
      return absl::PermissionDeniedError(absl::StrCat(
          "session ", request.session_id(), " belongs to another user"));
    }
    dataset = it->second.session->shared_dataset();
  }
  v1::DescribeSamplesResponse resp;
  for (uint64_t index : request.indices()) {
    if (index >= dataset->samples.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sample index ", index, " is outside the dataset's ",
          dataset->samples.size(), " samples"));
    }
    resp.add_paths(dataset->samples[index].path);
    DescribeFiles(*dataset, index, resp.add_samples());
  }
  return resp;
}

absl::Status Daemon::CheckQuotas(const Caller& caller, uint64_t ring_bytes) const {
  uint64_t total = ring_bytes, my_bytes = ring_bytes;
  uint32_t mine = 0;
  auto count = [&](int64_t uid, uint64_t bytes) {
    total += bytes;
    if (uid == caller.uid) {
      ++mine;
      my_bytes += bytes;
    }
  };
  for (const auto& [id, e] : sessions_) {
    count(e.owner_uid, e.session->ring().layout().segment_bytes);
  }
  for (const Reservation& r : reserved_) count(r.uid, r.bytes);
  const bool limited = caller.uid >= 0 && !caller.admin;
  if (limited && options_.max_ring_bytes_per_user > 0 &&
      my_bytes > options_.max_ring_bytes_per_user) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "uid ", caller.uid, "'s rings would take ", my_bytes >> 20, " MiB, over the "
        "daemon's --max-ring-bytes-per-user of ", options_.max_ring_bytes_per_user >> 20,
        " MiB: use fewer ring slots or a smaller batch, or close a session"));
  }
  if (options_.max_ring_bytes > 0 && total > options_.max_ring_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the node's rings would take ", total >> 20, " MiB, over the daemon's "
        "--max-ring-bytes of ", options_.max_ring_bytes >> 20,
        " MiB: use fewer ring slots or a smaller batch, or close a session"));
  }
  if (limited && options_.max_sessions_per_user > 0 &&
      mine >= options_.max_sessions_per_user) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "uid ", caller.uid, " already has ", mine, " open sessions, the "
        "daemon's --max-sessions-per-user"));
  }
  return absl::OkStatus();
}

absl::Status Daemon::Reserve(const Caller& caller, uint64_t session_id,
                             uint64_t ring_bytes) {
  absl::MutexLock lock(&mu_);
  STOKER_RETURN_IF_ERROR(CheckQuotas(caller, ring_bytes));
  reserved_.push_back(Reservation{session_id, caller.uid, ring_bytes});
  return absl::OkStatus();
}

void Daemon::Unreserve(uint64_t session_id) {
  reserved_.erase(std::remove_if(reserved_.begin(), reserved_.end(),
                                 [&](const Reservation& r) { return r.id == session_id; }),
                  reserved_.end());
}

v1::SessionStats Daemon::VisibleStats(const Entry& e, const Caller& caller) const {
  v1::SessionStats s = EntryStats(e);
  if (!caller.admin && e.owner_uid != caller.uid) {
    s.set_dataset("(another user's session)");
    s.set_client_pid(0);
  }
  return s;
}

}  // namespace stoker
