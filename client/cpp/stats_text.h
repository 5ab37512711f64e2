// `stokerctl stats`: a daemon's stats as text, one line per daemon-wide
// figure, cache tier and pool, and a few per session (its ring, pixel
// cache, remote reads per epoch, how its epoch mixes). Pure (stats in, text
// out), so it is unit-tested; thread-safe.
#ifndef STOKER_CLIENT_CPP_STATS_TEXT_H_
#define STOKER_CLIENT_CPP_STATS_TEXT_H_

#include <string>

#include "proto/stoker.pb.h"

namespace stoker {

std::string StatsText(const v1::DaemonStats& stats);

}  // namespace stoker

#endif  // STOKER_CLIENT_CPP_STATS_TEXT_H_
