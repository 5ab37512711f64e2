// A loopback proxy in front of a local S3 server that makes it look remote
// (server/objstore/fault_proxy.h): latency per request, a share of 503
// SlowDown and of connection resets (after the first N all 503). Prints
// its URL, then serves until stdin closes; then its tally on stderr. For
// bench/s3.py and tests.
//
//   s3_proxy --upstream_port 9000 --latency_ms 20 --slow_down 0.01
#include <unistd.h>

#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "server/objstore/fault_proxy.h"

ABSL_FLAG(int, upstream_port, 0, "the S3 server's port on 127.0.0.1");
ABSL_FLAG(int, latency_ms, 0, "added to each request");
ABSL_FLAG(double, slow_down, 0, "share of requests answered 503 SlowDown");
ABSL_FLAG(double, reset, 0, "share of requests whose connection is reset");
ABSL_FLAG(int, fail_first, 0, "the first N requests are answered 503 SlowDown");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  stoker::FaultProxy::Options o;
  o.upstream_port = static_cast<uint16_t>(absl::GetFlag(FLAGS_upstream_port));
  o.latency = absl::Milliseconds(absl::GetFlag(FLAGS_latency_ms));
  o.slow_down_share = absl::GetFlag(FLAGS_slow_down);
  o.reset_share = absl::GetFlag(FLAGS_reset);
  o.fail_first = absl::GetFlag(FLAGS_fail_first);
  auto proxy = stoker::FaultProxy::Start(o);
  if (!proxy.ok()) {
    std::fprintf(stderr, "s3_proxy: %s\n", std::string(proxy.status().message()).c_str());
    return 1;
  }
  std::printf("%s\n", (*proxy)->url().c_str());
  std::fflush(stdout);
  char c;
  while (read(0, &c, 1) > 0) {
  }
  const auto n = (*proxy)->counts();
  std::fprintf(stderr, "s3_proxy: %llu requests, %llu slow-downs, %llu resets\n",
               static_cast<unsigned long long>(n.requests),
               static_cast<unsigned long long>(n.slow_downs),
               static_cast<unsigned long long>(n.resets));
  return 0;
}
