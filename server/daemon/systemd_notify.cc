#include "server/daemon/systemd_notify.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "util/log.h"

namespace stoker {
namespace {

using SdNotify = int (*)(int unset_environment, const char* state);

SdNotify LoadSdNotify() {
  void* lib = dlopen("libsystemd.so.0", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    LogInfo(absl::StrCat("NOTIFY_SOCKET is set but libsystemd.so.0 did not "
                         "load: ", dlerror()));
    return nullptr;
  }
  return reinterpret_cast<SdNotify>(dlsym(lib, "sd_notify"));
}

}  // namespace

bool NotifySystemd(const std::string& state) {
  if (std::getenv("NOTIFY_SOCKET") == nullptr) return false;
  static std::once_flag once;
  static SdNotify notify = nullptr;
  std::call_once(once, [] { notify = LoadSdNotify(); });
  if (notify == nullptr) return false;
  const int rc = notify(0, state.c_str());
  if (rc <= 0) LogInfo(absl::StrCat("sd_notify failed: ", rc));
  return rc > 0;
}

}  // namespace stoker
