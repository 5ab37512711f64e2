// `stokerctl top`: a live view of a daemon, refreshed every second.
// RenderTop is pure (stats in, screen text out) so it is unit-tested; RunTop
// owns the terminal (raw mode, restored on exit) and returns on 'q' or
// Ctrl-C. Not thread-safe.
#ifndef STOKER_CLIENT_CPP_TOP_H_
#define STOKER_CLIENT_CPP_TOP_H_

#include <string>

#include "client/cpp/client.h"
#include "proto/stoker.pb.h"

namespace stoker {

// The screen for one snapshot, each line at most `width` columns.
std::string RenderTop(const v1::DaemonStats& stats, const std::string& socket,
                      int width);

// Refreshes until 'q', Ctrl-C or (iterations > 0) that many frames.
// Returns the process exit code.
int RunTop(Client& client, int iterations);

}  // namespace stoker

#endif  // STOKER_CLIENT_CPP_TOP_H_
