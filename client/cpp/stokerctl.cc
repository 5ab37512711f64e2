// stokerctl: command-line client for stokerd.
//
//   stokerctl [--socket PATH] read (--dataset DIR | --list MANIFEST [--root DIR])
//       --batch-size N [--epochs E] [--transform val|train] [--size S]
//       [--seed K] [--shuffle|--no-shuffle] [--rank R --world-size W]
//       [--drop-last] [--ring-slots N] [--start-epoch E --start-batch B]
//       [--json]
//   stokerctl [--socket PATH] stats [--json]
//   stokerctl [--socket PATH] health
//
// Exit status: 0 on success, 1 when the daemon reports an error, 2 for bad
// command-line usage.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cpp/client.h"
#include "client/cpp/read_summary.h"
#include "google/protobuf/util/json_util.h"

namespace stoker {
namespace {

constexpr char kUsage[] =
    "usage: stokerctl [--socket PATH] <command> [flags]\n"
    "commands:\n"
    "  read    read epochs from a dataset and print a JSON summary\n"
    "          (--dataset DIR | --list MANIFEST [--root DIR]) --batch-size N\n"
    "          [--epochs E=1] [--transform val|train] [--size S=224]\n"
    "          [--seed K] [--shuffle|--no-shuffle] [--rank R] [--world-size W]\n"
    "          [--drop-last] [--ring-slots N] [--start-epoch E]\n"
    "          [--start-batch B] [--json]\n"
    "  stats   print the daemon's counters and sessions [--json]\n"
    "  health  check that the daemon is serving\n";

const std::set<std::string> kBoolFlags = {"json", "shuffle", "no-shuffle",
                                          "drop-last", "help"};

struct Args {
  std::string command;
  std::map<std::string, std::string> flags;
};

int Usage(const std::string& problem) {
  std::fprintf(stderr, "stokerctl: %s\n%s", problem.c_str(), kUsage);
  return 2;
}

bool Parse(int argc, char** argv, Args* out, std::string* error) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0) {
      if (!out->command.empty()) {
        *error = absl::StrCat("unexpected argument '", a, "'");
        return false;
      }
      out->command = a;
      continue;
    }
    std::string name = a.substr(2), value;
    size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else if (kBoolFlags.count(name)) {
      value = "true";
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      *error = absl::StrCat("flag --", name, " needs a value");
      return false;
    }
    out->flags[name] = value;
  }
  return true;
}

// Reads an unsigned integer flag; false (with *error set) if malformed.
bool UintFlag(const Args& a, const std::string& name, uint64_t def,
              uint64_t* out, std::string* error) {
  auto it = a.flags.find(name);
  if (it == a.flags.end()) {
    *out = def;
    return true;
  }
  if (!absl::SimpleAtoi(it->second, out)) {
    *error = absl::StrCat("--", name, " must be a non-negative integer, got '",
                          it->second, "'");
    return false;
  }
  return true;
}

std::string Flag(const Args& a, const std::string& name) {
  auto it = a.flags.find(name);
  return it == a.flags.end() ? "" : it->second;
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "stokerctl: %s: %s\n",
               absl::StatusCodeToString(s.code()).c_str(),
               std::string(s.message()).c_str());
  return 1;
}

int Read(Client& client, const Args& a) {
  v1::SessionSpec spec;
  std::string err;
  const std::string dataset = Flag(a, "dataset"), list = Flag(a, "list");
  if (dataset.empty() == list.empty())
    return Usage("read needs exactly one of --dataset DIR or --list MANIFEST");
  spec.mutable_dataset()->set_kind(dataset.empty() ? v1::DatasetSpec::LIST
                                                   : v1::DatasetSpec::FOLDER);
  spec.mutable_dataset()->set_path(dataset.empty() ? list : dataset);
  spec.mutable_dataset()->set_root(Flag(a, "root"));
  const std::string transform = Flag(a, "transform").empty() ? "val" : Flag(a, "transform");
  if (transform != "val" && transform != "train")
    return Usage("--transform must be val or train");
  spec.set_transform(transform == "train" ? v1::TRAIN : v1::VAL);
  uint64_t batch_size, epochs, size, seed, rank, world, slots, se, sb;
  if (!a.flags.count("batch-size")) return Usage("read needs --batch-size");
  if (!UintFlag(a, "batch-size", 0, &batch_size, &err) ||
      !UintFlag(a, "epochs", 1, &epochs, &err) ||
      !UintFlag(a, "size", 224, &size, &err) ||
      !UintFlag(a, "seed", 0, &seed, &err) ||
      !UintFlag(a, "rank", 0, &rank, &err) ||
      !UintFlag(a, "world-size", 1, &world, &err) ||
      !UintFlag(a, "ring-slots", 0, &slots, &err) ||
      !UintFlag(a, "start-epoch", 0, &se, &err) ||
      !UintFlag(a, "start-batch", 0, &sb, &err)) {
    return Usage(err);
  }
  if (batch_size > UINT32_MAX || size > UINT32_MAX || rank > UINT32_MAX ||
      world > UINT32_MAX || slots > UINT32_MAX)
    return Usage("a numeric flag is out of range");
  spec.set_batch_size(static_cast<uint32_t>(batch_size));
  spec.set_image_size(static_cast<uint32_t>(size));
  spec.set_seed(seed);
  spec.set_rank(static_cast<uint32_t>(rank));
  spec.set_world_size(static_cast<uint32_t>(world));
  spec.set_ring_slots(static_cast<uint32_t>(slots));
  spec.set_start_epoch(se);
  spec.set_start_batch(sb);
  spec.set_drop_last(a.flags.count("drop-last") > 0);
  bool shuffle = transform == "train";
  if (a.flags.count("shuffle")) shuffle = true;
  if (a.flags.count("no-shuffle")) shuffle = false;
  spec.set_shuffle(shuffle);

  auto session = client.OpenSession(spec);
  if (!session.ok()) return Fail(session.status());
  const uint64_t total = epochs * (*session)->batches_per_epoch();
  auto summary = ReadBatches(**session, total);
  if (!summary.ok()) return Fail(summary.status());
  std::printf("%s\n", SummaryJson(*summary).c_str());
  return 0;
}

int Stats(Client& client, const Args& a) {
  auto stats = client.GetStats();
  if (!stats.ok()) return Fail(stats.status());
  if (a.flags.count("json")) {
    std::string json;
    google::protobuf::util::JsonPrintOptions opts;
    opts.always_print_primitive_fields = true;
    opts.preserve_proto_field_names = true;
    (void)google::protobuf::util::MessageToJsonString(*stats, &json, opts);
    std::printf("%s\n", json.c_str());
    return 0;
  }
  const v1::DaemonStats& s = *stats;
  std::printf("stokerd pid %u, version %s, up %.0f s, %u decode threads\n",
              s.pid(), s.version().c_str(), s.uptime_seconds(),
              s.decode_threads());
  std::printf("samples decoded %llu, failed %llu, bytes read %llu, batches %llu\n",
              (unsigned long long)s.samples_decoded(),
              (unsigned long long)s.samples_failed(),
              (unsigned long long)s.bytes_read(),
              (unsigned long long)s.batches_published());
  std::printf("sessions open %d, opened %llu, closed %llu, reclaimed %llu\n",
              s.sessions_size(), (unsigned long long)s.sessions_opened(),
              (unsigned long long)s.sessions_closed(),
              (unsigned long long)s.sessions_reclaimed());
  for (const v1::SessionStats& ss : s.sessions()) {
    std::printf("  session %llu pid %u: %s, %llu batches, %llu failed, ring %u/%u\n",
                (unsigned long long)ss.session_id(), ss.client_pid(),
                ss.dataset().c_str(), (unsigned long long)ss.batches_published(),
                (unsigned long long)ss.samples_failed(), ss.ring_ready(),
                ss.ring_slots());
  }
  return 0;
}

int Main(int argc, char** argv) {
  Args args;
  std::string err;
  if (!Parse(argc, argv, &args, &err)) return Usage(err);
  if (args.command.empty() || args.flags.count("help")) return Usage("no command");
  std::string socket = Flag(args, "socket");
  if (socket.empty()) {
    const char* env = std::getenv("STOKER_SOCKET");
    socket = env ? env : "/run/stoker/stoker.sock";
  }
  static const std::map<std::string, std::set<std::string>> kKnown = {
      {"read", {"socket", "dataset", "list", "root", "batch-size", "epochs",
                "transform", "size", "seed", "shuffle", "no-shuffle", "rank",
                "world-size", "drop-last", "ring-slots", "start-epoch",
                "start-batch", "json"}},
      {"stats", {"socket", "json"}},
      {"health", {"socket"}},
  };
  auto known = kKnown.find(args.command);
  if (known == kKnown.end())
    return Usage(absl::StrCat("unknown command '", args.command, "'"));
  for (const auto& [name, value] : args.flags) {
    if (!known->second.count(name))
      return Usage(absl::StrCat("unknown flag --", name, " for ", args.command));
  }
  auto client = Client::Connect(socket);
  if (!client.ok()) return Fail(client.status());
  if (args.command == "read") return Read(**client, args);
  if (args.command == "stats") return Stats(**client, args);
  absl::Status h = (*client)->CheckHealth();
  if (!h.ok()) return Fail(h);
  std::printf("SERVING\n");
  return 0;
}

}  // namespace
}  // namespace stoker

int main(int argc, char** argv) { return stoker::Main(argc, argv); }
