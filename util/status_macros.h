// Small helpers for absl::Status that Debian's abseil (20220623) lacks.
// Header-only; no state. STOKER_RETURN_IF_ERROR(expr) returns the status of
// `expr` from the enclosing function when it is not OK;
// STOKER_ASSIGN_OR_RETURN(lhs, expr) unwraps an absl::StatusOr or returns its
// error. ErrnoStatus(e, what) maps an errno value to the canonical code.
#ifndef STOKER_UTIL_STATUS_MACROS_H_
#define STOKER_UTIL_STATUS_MACROS_H_

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

#define STOKER_CONCAT_INNER_(a, b) a##b
#define STOKER_CONCAT_(a, b) STOKER_CONCAT_INNER_(a, b)

#define STOKER_RETURN_IF_ERROR(expr)               \
  do {                                             \
    ::absl::Status stoker_status_ = (expr);        \
    if (!stoker_status_.ok()) return stoker_status_; \
  } while (0)

#define STOKER_ASSIGN_OR_RETURN(lhs, expr) \
  STOKER_ASSIGN_OR_RETURN_IMPL_(STOKER_CONCAT_(stoker_or_, __LINE__), lhs, expr)

#define STOKER_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return std::move(tmp).status();      \
  lhs = std::move(tmp).value()

namespace stoker {

// Converts an errno value into a Status whose message reads
// "<what>: <strerror>". ENOENT -> NOT_FOUND, ENOSPC/ENOMEM -> RESOURCE_EXHAUSTED,
// EACCES/EPERM -> PERMISSION_DENIED, EEXIST -> ALREADY_EXISTS, EINVAL ->
// INVALID_ARGUMENT, anything else -> INTERNAL.
inline absl::Status ErrnoStatus(int err, const std::string& what) {
  std::string msg = absl::StrCat(what, ": ", std::strerror(err));
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return absl::NotFoundError(msg);
    case ENOSPC:
    case ENOMEM:
    case EMFILE:
    case ENFILE:
    case EFBIG:
      return absl::ResourceExhaustedError(msg);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(msg);
    case EEXIST:
      return absl::AlreadyExistsError(msg);
    case EINVAL:
      return absl::InvalidArgumentError(msg);
    default:
      return absl::InternalError(msg);
  }
}

}  // namespace stoker

#endif  // STOKER_UTIL_STATUS_MACROS_H_
