// stokerctl: command-line client for stokerd.
//
//   stokerctl [--socket PATH] read --dataset (PATH | JSON) [--root DIR]
//       --batch-size N [--epochs E] [--transform val|train] [--size S]
//       [--seed K] [--shuffle|--no-shuffle] [--rank R --world-size W]
//       [--drop-last] [--ring-slots N] [--max-side N | --no-pixel-cache]
//       [--partitions C] [--exchange Q] [--first-epoch canonical|windows]
//       [--start-epoch E [--start-position P] --start-batch B] [--json]
//   stokerctl [--socket PATH] warm --dataset (PATH | JSON) [--root DIR]
//       [--concurrency N]
//   stokerctl [--socket PATH] stats [--json]
//   stokerctl [--socket PATH] health
//   stokerctl [--socket PATH] sessions
//   stokerctl [--socket PATH] close --session ID
//   stokerctl [--socket PATH] resize --pool decode|reader --threads N [--node K]
//   stokerctl [--socket PATH] top [--frames N]
//
// Exit status: 0 on success, 1 when the daemon reports an error, 2 for bad
// command-line usage.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "client/cpp/client.h"
#include "client/cpp/daemon_locator.h"
#include "client/cpp/dataset_spec.h"
#include "client/cpp/stats_text.h"
#include "client/cpp/read_summary.h"
#include "client/cpp/top.h"
#include "proto/schema.h"
#include "proto/spec_util.h"
#include "util/proto_json.h"
#include "util/version.h"

namespace stoker {
namespace {

// Every command's options: name (without --), whether it is a flag (no
// value), and its help line. CLI11 builds --help for the program and each
// command from this table, and parses; the commands read the values back
// by name.
struct OptionSpec {
  const char* name;
  bool is_flag;
  const char* help;
};

constexpr OptionSpec kDatasetOptions[] = {
    {"dataset", false,
     "a path (an image folder, a manifest, an LMDB folder, an .npy file, WebDataset shards: "
     "a .tar, a folder of them, or dir/train-{000000..000146}.tar; an ImageFolder in S3: "
     "s3://bucket/prefix/), or a source as "
     "JSON under its kind's key, one of {kinds}: '{\"lmdb\": {\"path\": \"db\", "
     "\"manifest\": \"keys.tsv\"}}'"},
    {"root", false, "folder a manifest's paths are relative to"},
};

// The options that set one SessionSpec field each, by the field's name.
constexpr std::pair<const char*, const char*> kSettingOptions[] = {
    {"batch-size", "batch_size"},   {"size", "image_size"},
    {"seed", "seed"},               {"rank", "rank"},
    {"world-size", "world_size"},   {"ring-slots", "ring_slots"},
    {"partitions", "partitions"},   {"exchange", "exchange"},
    {"start-epoch", "start_epoch"}, {"start-position", "start_position"},
    {"start-batch", "start_batch"},
};

// `words` and the field's range and default as the schema states them:
// "batches prefetched (2..256; default 4)".
const char* SettingHelp(const char* words, const std::string& field) {
  static auto* texts = new std::deque<std::string>;
  const std::string range = SettingText(field);
  texts->push_back(range.empty() ? words : absl::StrCat(words, " (", range, ")"));
  return texts->back().c_str();
}

// The preset image's dtypes, from the dtype table.
const char* ImageDTypeHelp() {
  static const std::string* help = new std::string(ImageDTypeNames());
  return help->c_str();
}

const std::map<std::string, std::pair<std::string, std::vector<OptionSpec>>>&
Commands() {
  static const auto* commands =
      new std::map<std::string, std::pair<std::string, std::vector<OptionSpec>>>{
          {"read",
           {"read epochs from a dataset and print a JSON summary (exit status 1 "
            "when a sample failed, unless --allow-errors)",
            {{"spec", false,
              "a SessionSpec in JSON (a file, or - for stdin): any source, "
              "fields and pipeline; then only --epochs applies"},
             {"batch-size", false, SettingHelp("samples per batch, required", "batch_size")},
             {"epochs", false, "epochs to read (default 1)"},
             {"transform", false, "val (default) or train"},
             {"size", false, SettingHelp("output side in pixels", "image_size")},
             {"seed", false, "shuffle and augmentation seed"},
             {"shuffle", true, "shuffle (train's default)"},
             {"no-shuffle", true, "do not shuffle"},
             {"rank", false, "this reader's rank"},
             {"world-size", false, SettingHelp("number of ranks", "world_size")},
             {"drop-last", true, "drop the last incomplete batch"},
             {"ring-slots", false, SettingHelp("batches prefetched", "ring_slots")},
             {"max-side", false,
              "train from the daemon's pixel cache: pictures kept with their "
              "longer side at most this (16..16384)"},
             {"no-pixel-cache", true, "decode every epoch (pixel_cache.off)"},
             {"partitions", false,
              SettingHelp("canonical partitions of the order", "partitions")},
             {"exchange", false,
              SettingHelp("fraction of each partition exchanged per epoch after the first",
                          "exchange")},
             {"first-epoch", false,
              "a bucket's folder: canonical (after the whole listing; a world's default) "
              "or windows (one rank's); a resume within the first epoch gives the run's"},
             {"start-epoch", false, "resume at this epoch"},
             {"start-position", false,
              "read the start epoch from this position of its order (the "
              "samples the world consumed of it)"},
             {"start-batch", false, "resume at this batch (from the position)"},
             {"decode", false, "auto, full, crop or scale_crop"},
             {"dtype", false, ImageDTypeHelp()},
             {"on-error", false, "replace (default), raise or zeros"},
             {"allow-errors", true, "exit 0 even when samples failed"},
             {"json", true, "print JSON (the default for read)"}}}},
          {"warm",
           {"pull a dataset into the daemon's caches, showing progress",
            {{"concurrency", false, "reads at a time (default the daemon's)"}}}},
          {"stats",
           {"print the daemon's counters, caches and sessions",
            {{"json", true, "as JSON (numbers as numbers)"}}}},
          {"health", {"check that the daemon is serving", {}}},
          {"sessions", {"list open sessions with their diagnosis", {}}},
          {"close", {"close a session", {{"session", false, "session id"}}}},
          {"resize",
           {"resize a pool live",
            {{"pool", false, "decode or reader"},
             {"threads", false, "new thread count (decode: over all nodes)"},
             {"node", false, "only this NUMA node's decode pool"}}}},
          {"top",
           {"live view, refreshed every second (q or Ctrl-C quits)",
            {{"frames", false, "stop after this many frames (0: never)"}}}},
      };
  return *commands;
}

struct Args {
  std::string command;
  std::string socket;
  std::map<std::string, std::string> flags;  // Given options only.
};

// Parses the command line with CLI11. Returns -1 to go on, else the exit
// status (0 after --help/--version, 2 for a usage error, with the message).
int Parse(int argc, char** argv, Args* out) {
  CLI::App app{"stokerctl: command-line client for stokerd", "stokerctl"};
  app.set_version_flag("--version",
                       absl::StrCat("stokerctl ", kVersion, " (", kBuildType, ")"));
  app.add_option("--socket", out->socket,
                 "the daemon's socket (default $STOKER_SOCKET, else "
                 "/run/stoker/stoker.sock if a daemon answers there, else this "
                 "user's embedded daemon; STOKER_SOCKET=embedded: that one)");
  app.require_subcommand(1);
  std::map<std::string, std::string> values;
  std::map<std::string, CLI::Option*> given;
  std::map<std::string, CLI::App*> subs;
  for (const auto& [name, command] : Commands()) {
    CLI::App* sub = app.add_subcommand(name, command.first);
    subs[name] = sub;
    std::vector<OptionSpec> options = command.second;
    if (name == "read" || name == "warm") {
      options.insert(options.begin(), std::begin(kDatasetOptions),
                     std::end(kDatasetOptions));
    }
    // The schema's source kinds, as "folder"|"list"|...
    const std::string kind_list =
        absl::StrCat("\"", absl::StrJoin(DatasetSourceKinds(), "\"|\""), "\"");
    for (const OptionSpec& o : options) {
      const std::string key = name + "/" + o.name;
      const std::string flag = std::string("--") + o.name;
      const std::string help = absl::StrReplaceAll(o.help, {{"{kinds}", kind_list}});
      given[key] = o.is_flag ? sub->add_flag(flag, help)
                             : sub->add_option(flag, values[key], help);
    }
    sub->add_option("--socket", out->socket, "the daemon's socket");
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return e.get_exit_code() == 0 ? app.exit(e) : (app.exit(e), 2);
  }
  for (const auto& [name, sub] : subs) {
    if (!sub->parsed()) continue;
    out->command = name;
    for (const auto& [key, option] : given) {
      if (key.rfind(name + "/", 0) != 0 || option->count() == 0) continue;
      const std::string flag = key.substr(name.size() + 1);
      out->flags[flag] = option->get_expected_min() == 0 ? "true" : values[key];
    }
  }
  return -1;
}

int Usage(const std::string& problem) {
  std::fprintf(stderr, "stokerctl: %s (see stokerctl --help)\n", problem.c_str());
  return 2;
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

// Sets the number field `name` of `m` from `text` (an unsigned integer
// that fits the field, or a number for a float); false with *error.
bool SetField(google::protobuf::Message* m, const std::string& name, const std::string& text,
              std::string* error) {
  const auto* f = m->GetDescriptor()->FindFieldByName(name);
  const auto* r = m->GetReflection();
  uint64_t u;
  float x;
  switch (f->cpp_type()) {
    case google::protobuf::FieldDescriptor::CPPTYPE_FLOAT:
      if (!absl::SimpleAtof(text, &x)) break;
      r->SetFloat(m, f, x);
      return true;
    case google::protobuf::FieldDescriptor::CPPTYPE_UINT32:
      if (!absl::SimpleAtoi(text, &u) || u > UINT32_MAX) break;
      r->SetUInt32(m, f, static_cast<uint32_t>(u));
      return true;
    case google::protobuf::FieldDescriptor::CPPTYPE_UINT64:
      if (!absl::SimpleAtoi(text, &u)) break;
      r->SetUInt64(m, f, u);
      return true;
    default:
      break;
  }
  const std::string range = SettingText(name);
  *error = absl::StrCat("must be a number", range.empty() ? "" : absl::StrCat(" (", range, ")"),
                        ", got '", text, "'");
  return false;
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

// Fills `ds` from --dataset [--root] (client/cpp/dataset_spec.h); false
// (with *error set) when it names no dataset.
bool DatasetFromFlags(const Args& a, v1::DatasetSpec* ds, std::string* error) {
  const std::string dataset = Flag(a, "dataset");
  if (dataset.empty()) {
    *error = "give --dataset PATH or --dataset '{\"<kind>\": {\"path\": ...}}'";
    return false;
  }
  absl::StatusOr<v1::DatasetSpec> named = NameDataset(dataset, Flag(a, "root"));
  if (!named.ok()) {
    *error = std::string(named.status().message());
    return false;
  }
  *ds = *std::move(named);
  return true;
}

// Reads, opens and summarizes `epochs` epochs of a session.
int ReadSession(Client& client, const v1::SessionSpec& spec, uint64_t epochs,
                const Args& a);

int Read(Client& client, const Args& a) {
  v1::SessionSpec spec;
  std::string err;
  if (a.flags.count("spec")) {
    const std::string path = Flag(a, "spec");
    std::ifstream file;
    if (path != "-") file.open(path);
    std::istream& in = path == "-" ? std::cin : file;
    if (!in) return Usage(absl::StrCat("cannot read --spec ", path));
    const std::string json((std::istreambuf_iterator<char>(in)),
                           std::istreambuf_iterator<char>());
    absl::Status parsed = JsonToProto(json, &spec);
    if (!parsed.ok()) return Usage(std::string(parsed.message()));
    uint64_t epochs;
    if (!UintFlag(a, "epochs", 1, &epochs, &err)) return Usage(err);
    return ReadSession(client, spec, epochs, a);
  }
  if (!DatasetFromFlags(a, spec.mutable_dataset(), &err)) return Usage(err);
  // Names map onto the proto's enums (the one schema), not a table here.
  auto set_enum = [&](const char* flag, const char* fallback,
                      const char* field) -> bool {
    const std::string name = Flag(a, flag).empty() ? fallback : Flag(a, flag);
    const auto* f = spec.GetDescriptor()->FindFieldByName(field);
    int value = 0;
    absl::Status s = EnumFromName(f->enum_type(), name,
                                  absl::StrCat("--", flag), &value);
    if (!s.ok()) {
      err = std::string(s.message());
      return false;
    }
    spec.GetReflection()->SetEnumValue(&spec, f, value);
    return true;
  };
  if (!set_enum("transform", "val", "transform") ||
      !set_enum("decode", "auto", "decode") ||
      !set_enum("dtype", "uint8", "dtype") ||
      !set_enum("on-error", "replace", "on_error")) {
    return Usage(err);
  }
  uint64_t epochs, max_side;
  if (!a.flags.count("batch-size")) return Usage("read needs --batch-size");
  if (!UintFlag(a, "epochs", 1, &epochs, &err) || !UintFlag(a, "max-side", 0, &max_side, &err))
    return Usage(err);
  if (max_side > UINT32_MAX) return Usage("--max-side is out of range");
  // Given settings only: the daemon applies the schema's defaults to the rest.
  for (const auto& [flag, field] : kSettingOptions) {
    if (a.flags.count(flag) && !SetField(&spec, field, a.flags.at(flag), &err))
      return Usage(absl::StrCat("--", flag, " ", err));
  }
  if (max_side > 0) spec.mutable_pixel_cache()->set_max_side(static_cast<uint32_t>(max_side));
  if (a.flags.count("no-pixel-cache")) spec.mutable_pixel_cache()->set_off(true);
  if (a.flags.count("first-epoch")) {
    const std::string& f = a.flags.at("first-epoch");
    if (f != "canonical" && f != "windows") {
      return Usage("--first-epoch must be canonical or windows");
    }
    spec.set_canonical_first_epoch(f == "canonical");
  }
  spec.set_drop_last(a.flags.count("drop-last") > 0);
  bool shuffle = spec.transform() == v1::TRANSFORM_TRAIN;
  if (a.flags.count("shuffle")) shuffle = true;
  if (a.flags.count("no-shuffle")) shuffle = false;
  spec.set_shuffle(shuffle);

  return ReadSession(client, spec, epochs, a);
}

int ReadSession(Client& client, const v1::SessionSpec& spec, uint64_t epochs,
                const Args& a) {
  auto session = client.OpenSession(spec);
  if (!session.ok()) return Fail(session.status());
  const uint64_t total = epochs * (*session)->batches_per_epoch();
  auto summary = ReadBatches(**session, total);
  if (!summary.ok()) return Fail(summary.status());
  std::printf("%s\n", SummaryJson(*summary).c_str());
  if (summary->errors > 0 && !a.flags.count("allow-errors")) {
    std::fprintf(stderr,
                 "stokerctl: %llu sample(s) could not be read or decoded "
                 "(replaced or zeroed, see the daemon's log); "
                 "--allow-errors accepts that\n",
                 static_cast<unsigned long long>(summary->errors));
    return 1;
  }
  return 0;
}

int Warm(Client& client, const Args& a) {
  v1::WarmCacheRequest req;
  std::string err;
  uint64_t concurrency = 0;
  if (!DatasetFromFlags(a, req.mutable_dataset(), &err) ||
      !UintFlag(a, "concurrency", 0, &concurrency, &err)) {
    return Usage(err);
  }
  req.set_concurrency(static_cast<uint32_t>(std::min<uint64_t>(concurrency, 1024)));
  auto started = client.WarmCache(req);
  if (!started.ok()) return Fail(started.status());
  const bool tty = isatty(STDERR_FILENO);
  while (true) {
    auto stats = client.GetStats();
    if (!stats.ok()) return Fail(stats.status());
    const v1::WarmJob* job = nullptr;
    for (const auto& j : stats->warm_jobs()) {
      if (j.job_id() == started->job_id()) job = &j;
    }
    if (job == nullptr) return Fail(absl::NotFoundError("warm job vanished"));
    const double pct = job->total() ? 100.0 * job->done() / job->total() : 100;
    std::fprintf(stderr, "%swarm: %llu/%llu samples (%.1f%%), %llu read from "
                 "the source, %llu failed, %.1f s%s",
                 tty ? "\r" : "", (unsigned long long)job->done(),
                 (unsigned long long)job->total(), pct,
                 (unsigned long long)job->source_reads(),
                 (unsigned long long)job->failed(), job->seconds(),
                 tty ? "" : "\n");
    if (job->finished()) {
      if (tty) std::fprintf(stderr, "\n");
      std::printf("{\"job_id\": %llu, \"total\": %llu, \"source_reads\": %llu, "
                  "\"failed\": %llu, \"seconds\": %.3f}\n",
                  (unsigned long long)job->job_id(),
                  (unsigned long long)job->total(),
                  (unsigned long long)job->source_reads(),
                  (unsigned long long)job->failed(), job->seconds());
      return job->failed() ? 1 : 0;
    }
    absl::SleepFor(absl::Milliseconds(tty ? 200 : 1000));
  }
}

int Stats(Client& client, const Args& a) {
  auto stats = client.GetStats();
  if (!stats.ok()) return Fail(stats.status());
  if (a.flags.count("json")) {
    // Numbers as JSON numbers (protobuf's printer quotes 64-bit ones).
    std::printf("%s\n", ProtoToJson(*stats).c_str());
    return 0;
  }
  std::fputs(StatsText(*stats).c_str(), stdout);
  return 0;
}

int Main(int argc, char** argv) {
  Args args;
  std::string err;
  if (int code = Parse(argc, argv, &args); code >= 0) return code;
  std::string socket = args.socket;
  if (socket.empty()) {
    absl::StatusOr<DaemonLocation> at = LocateDaemon();
    if (!at.ok()) return Fail(at.status());
    if (at->embedded) {
      if (!SocketAnswers(at->socket)) {
        const char* named = std::getenv("STOKER_SOCKET");
        return Fail(absl::UnavailableError(absl::StrCat(
            named != nullptr && named == std::string(kEmbeddedName)
                ? "STOKER_SOCKET=embedded"
                : absl::StrCat("no daemon answers at ", kNodeSocket),
            ", and this user's embedded daemon (", at->socket,
            ") is not running: a Loader starts it; its last log is ", at->log)));
      }
      std::fprintf(stderr, "stokerctl: %s\n", at->Describe().c_str());
    }
    socket = at->socket;
  }
  auto client = Client::Connect(socket);
  if (!client.ok()) return Fail(client.status());
  if (args.command == "read") return Read(**client, args);
  if (args.command == "stats") return Stats(**client, args);
  if (args.command == "warm") return Warm(**client, args);
  if (args.command == "top") {
    uint64_t frames = 0;
    if (!UintFlag(args, "frames", 0, &frames, &err)) return Usage(err);
    return RunTop(**client, static_cast<int>(frames));
  }
  if (args.command == "sessions") {
    auto list = (*client)->ListSessions();
    if (!list.ok()) return Fail(list.status());
    std::printf("%-8s %-8s %10s %6s %4s %-22s %s\n", "SESSION", "PID", "BATCHES",
                "RING", "NODE", "DIAGNOSIS", "DATASET");
    for (const auto& s : list->sessions()) {
      std::printf("%-8llu %-8u %10llu %2u/%-3u %4d %-22s %s\n",
                  (unsigned long long)s.session_id(), s.client_pid(),
                  (unsigned long long)s.batches_delivered(), s.ring_ready(),
                  s.ring_slots(), s.numa_node(), DiagnosisName(s.diagnosis()).c_str(),
                  s.dataset().c_str());
    }
    return 0;
  }
  if (args.command == "close") {
    uint64_t id = 0;
    if (!args.flags.count("session") || !UintFlag(args, "session", 0, &id, &err))
      return Usage(err.empty() ? "close needs --session ID" : err);
    absl::Status s = (*client)->CloseSession(id);
    if (!s.ok()) return Fail(s);
    std::printf("closed session %llu\n", (unsigned long long)id);
    return 0;
  }
  if (args.command == "resize") {
    uint64_t threads = 0;
    if (!args.flags.count("threads") || !UintFlag(args, "threads", 0, &threads, &err))
      return Usage(err.empty() ? "resize needs --threads N" : err);
    uint64_t node = 0;
    const bool one_node = args.flags.count("node") > 0;
    if (one_node && !UintFlag(args, "node", 0, &node, &err)) return Usage(err);
    auto r = (*client)->ResizePool(Flag(args, "pool"),
                                   static_cast<uint32_t>(std::min<uint64_t>(threads, 1u << 20)),
                                   one_node ? static_cast<int>(std::min<uint64_t>(node, 1u << 20))
                                            : -1);
    if (!r.ok()) return Fail(r.status());
    std::printf("%s pool%s: %u -> %u threads\n", Flag(args, "pool").c_str(),
                one_node ? absl::StrCat(" of node ", node).c_str() : "",
                r->previous_threads(), r->threads());
    return 0;
  }
  absl::Status h = (*client)->CheckHealth();
  if (!h.ok()) return Fail(h);
  std::printf("SERVING\n");
  return 0;
}

}  // namespace
}  // namespace stoker

int main(int argc, char** argv) { return stoker::Main(argc, argv); }
