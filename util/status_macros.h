// Small helpers for absl::Status that Debian's abseil (20220623) lacks.
// Header-only; no state. STOKER_RETURN_IF_ERROR(expr) returns the status of
// `expr` from the enclosing function when it is not OK;
// STOKER_ASSIGN_OR_RETURN(lhs, expr) unwraps an absl::StatusOr or returns its
// error. ErrnoStatus(e, what) maps an errno value to the canonical code.
// Guarded(where, fn) is the exception barrier: no exception crosses a thread
// or an API, so every task, RPC and daemon thread runs its work through it.
#ifndef STOKER_UTIL_STATUS_MACROS_H_
#define STOKER_UTIL_STATUS_MACROS_H_

#include <cerrno>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <type_traits>
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

// The status for the exception being handled; call only inside a catch
// block. std::bad_alloc -> RESOURCE_EXHAUSTED, anything else -> INTERNAL,
// both naming `where`.
inline absl::Status CurrentExceptionStatus(absl::string_view where) {
  try {
    throw;
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrCat(where, ": out of memory"));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(where, ": ", e.what()));
  } catch (...) {
    return absl::InternalError(absl::StrCat(where, ": unknown exception"));
  }
}

// fn() (returning absl::Status or absl::StatusOr<T>), with any exception it
// throws turned into CurrentExceptionStatus(where).
template <typename Fn>
auto Guarded(absl::string_view where, Fn&& fn) -> std::invoke_result_t<Fn> {
  try {
    return std::forward<Fn>(fn)();
  } catch (...) {
    return std::invoke_result_t<Fn>(CurrentExceptionStatus(where));
  }
}

}  // namespace stoker

#endif  // STOKER_UTIL_STATUS_MACROS_H_
