// The C ABI (stoker.h) over the C++ client: converts types and statuses and
// nothing else. No C++ exception or type crosses it.
#include "client/c/stoker.h"

#include <algorithm>
#include <iterator>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "client/cpp/client.h"
#include "client/cpp/daemon_locator.h"
#include "client/cpp/dataset_spec.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"
#include "proto/schema.h"
#include "server/pipeline/spec_check.h"
#include "shm/ring_data.h"
#include "util/checksum.h"
#include "util/proto_json.h"
#include "util/version.h"


struct stoker_client {
  std::unique_ptr<stoker::Client> client;
};
struct stoker_session {
  std::unique_ptr<stoker::Session> session;
};
struct stoker_batch {
  stoker::Batch batch;
};

static_assert(STOKER_DTYPE_UINT8 == stoker::shm::kDTypeUint8 &&
                  STOKER_DTYPE_FLOAT32 == stoker::shm::kDTypeFloat32 &&
                  STOKER_DTYPE_FLOAT16 == stoker::shm::kDTypeFloat16 &&
                  STOKER_DTYPE_UINT16 == stoker::shm::kDTypeUint16 &&
                  STOKER_DTYPE_INT16 == stoker::shm::kDTypeInt16 &&
                  STOKER_DTYPE_INT32 == stoker::shm::kDTypeInt32 &&
                  STOKER_DTYPE_INT64 == stoker::shm::kDTypeInt64 &&
                  STOKER_DTYPE_BFLOAT16 == stoker::shm::kDTypeBfloat16 &&
                  stoker::shm::FieldDTypeCount() == 8,
              "stoker.h's dtype codes are the ring's table");
static_assert(STOKER_SAMPLE_OK == stoker::shm::kSampleOk &&
                  STOKER_SAMPLE_READ_ERROR == stoker::shm::kSampleReadError &&
                  STOKER_SAMPLE_DECODE_ERROR == stoker::shm::kSampleDecodeError &&
                  STOKER_SAMPLE_REPLACED == stoker::shm::kSampleReplaced,
              "stoker.h's sample status codes are the ring's");

namespace {

int Report(const absl::Status& s, stoker_error* err) {
  const int code = static_cast<int>(s.code());
  if (err != nullptr) {
    err->code = code;
    const std::string msg(s.message());
    const size_t n = std::min(msg.size(), sizeof(err->message) - 1);
    std::memcpy(err->message, msg.data(), n);
    err->message[n] = '\0';
  }
  return code;
}

int NullArgument(const char* what, stoker_error* err) {
  return Report(absl::InvalidArgumentError(std::string(what) + " is NULL"), err);
}

char* CopyString(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (out != nullptr) std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

absl::Duration Timeout(double seconds) {
  return seconds < 0 ? absl::InfiniteDuration() : absl::Seconds(seconds);
}

// The daemon's description of `n` indices, in JSON made by `json`.
template <typename Json>
int Describe(stoker_session* session, const uint64_t* indices, size_t n, char** json_out,
             stoker_error* err, Json json) {
  if (session == nullptr) return NullArgument("session", err);
  if (json_out == nullptr || (indices == nullptr && n > 0)) {
    return NullArgument("indices/json_out", err);
  }
  auto resp = session->session->Describe(std::vector<uint64_t>(indices, indices + n));
  if (!resp.ok()) return Report(resp.status(), err);
  *json_out = CopyString(json(*resp));
  return STOKER_OK;
}

}  // namespace

extern "C" {

uint32_t stoker_abi_version(void) { return STOKER_ABI_VERSION; }
const char* stoker_version(void) { return stoker::kVersion; }

int stoker_connect(const char* socket_path, double timeout_seconds,
                   stoker_client** out, stoker_error* err) {
  if (socket_path == nullptr) return NullArgument("socket_path", err);
  if (out == nullptr) return NullArgument("out", err);
  auto c = stoker::Client::Connect(socket_path, Timeout(timeout_seconds));
  if (!c.ok()) return Report(c.status(), err);
  *out = new stoker_client{*std::move(c)};
  return STOKER_OK;
}

void stoker_client_free(stoker_client* client) { delete client; }

int stoker_open_session(stoker_client* client, const char* spec_json,
                        stoker_session** out, stoker_error* err) {
  if (client == nullptr) return NullArgument("client", err);
  if (spec_json == nullptr) return NullArgument("spec_json", err);
  if (out == nullptr) return NullArgument("out", err);
  stoker::v1::SessionSpec spec;
  absl::Status parsed = stoker::JsonToProto(spec_json, &spec);
  if (!parsed.ok()) return Report(parsed, err);
  auto s = client->client->OpenSession(spec);
  if (!s.ok()) return Report(s.status(), err);
  *out = new stoker_session{*std::move(s)};
  return STOKER_OK;
}

int stoker_locate_daemon(char** json_out, stoker_error* err) {
  if (json_out == nullptr) return NullArgument("json_out", err);
  absl::StatusOr<stoker::DaemonLocation> at = stoker::LocateDaemon();
  if (!at.ok()) return Report(at.status(), err);
  nlohmann::json j = {{"socket", at->socket}, {"embedded", at->embedded},
                      {"described", at->Describe()}};
  if (at->embedded) j["log"] = at->log;
  try {
    *json_out = CopyString(j.dump());
  } catch (const nlohmann::json::exception&) {
    return Report(absl::InvalidArgumentError(
                      "STOKER_SOCKET or STOKER_EMBEDDED_DIR is not UTF-8 text"), err);
  }
  return STOKER_OK;
}

int stoker_socket_answers(const char* path) {
  return path != nullptr && stoker::SocketAnswers(path) ? 1 : 0;
}

int stoker_check_spec(const char* spec_json, stoker_error* err) {
  if (spec_json == nullptr) return NullArgument("spec_json", err);
  stoker::v1::SessionSpec spec;
  absl::Status parsed = stoker::JsonToProto(spec_json, &spec);
  if (!parsed.ok()) return Report(parsed, err);
  absl::Status checked = stoker::CheckSessionSpec(&spec).status();
  if (!checked.ok()) return Report(checked, err);
  return STOKER_OK;
}

const char* stoker_dtypes_json(void) {
  static const std::string* table = [] {
    nlohmann::json rows = nlohmann::json::array();
    for (const stoker::shm::DTypeInfo& d : stoker::shm::kElemTypes) {
      if (!d.is_field()) continue;
      rows.push_back({{"code", d.code}, {"name", d.name}, {"bytes", d.bytes},
                      {"format", d.format}, {"float", d.is_float()},
                      {"numpy", d.numpy}, {"torch", d.torch}});
    }
    return new std::string(rows.dump());
  }();
  return table->c_str();
}

const char* stoker_op_defaults_json(void) { return stoker::OpDefaultsJson().c_str(); }
const char* stoker_source_kinds_json(void) { return stoker::SourceKindsJson().c_str(); }
const char* stoker_session_settings_json(void) {
  return stoker::SessionSettingsJson().c_str();
}

int stoker_dataset_json(const char* dataset, const char* root, char** json_out,
                        stoker_error* err) {
  if (dataset == nullptr) return NullArgument("dataset", err);
  if (json_out == nullptr) return NullArgument("json_out", err);
  auto ds = stoker::NameDataset(dataset, root == nullptr ? "" : root);
  if (!ds.ok()) return Report(ds.status(), err);
  *json_out = CopyString(stoker::ProtoToJson(*ds));
  return STOKER_OK;
}

int stoker_session_info_json(const stoker_session* session, char** json_out,
                             stoker_error* err) {
  if (session == nullptr) return NullArgument("session", err);
  if (json_out == nullptr) return NullArgument("json_out", err);
  *json_out = CopyString(stoker::ProtoToJson(session->session->info()));
  return STOKER_OK;
}

uint64_t stoker_session_id(const stoker_session* session) {
  return session == nullptr ? 0 : session->session->id();
}

uint64_t stoker_session_reconnects(const stoker_session* session) {
  return session == nullptr ? 0 : session->session->reconnects();
}

int stoker_session_describe_samples(stoker_session* session,
                                    const uint64_t* indices, size_t n,
                                    char** json_out, stoker_error* err) {
  return Describe(session, indices, n, json_out, err, [](const stoker::v1::DescribeSamplesResponse& r) {
    return nlohmann::json(std::vector<std::string>(r.paths().begin(), r.paths().end())).dump();
  });
}

int stoker_session_describe(stoker_session* session, const uint64_t* indices, size_t n,
                            char** json_out, stoker_error* err) {
  return Describe(session, indices, n, json_out, err,
                  [](const stoker::v1::DescribeSamplesResponse& r) { return stoker::ProtoToJson(r); });
}

void stoker_session_set_resume_window(stoker_session* session, double seconds) {
  if (session != nullptr) {
    session->session->set_resume_window(absl::Seconds(std::max(0.0, seconds)));
  }
}

void stoker_session_set_cpu_share(stoker_session* session, double share) {
  if (session != nullptr) session->session->SetCpuShare(share);
}

int stoker_session_daemon_decode(const stoker_session* session,
                                 stoker_daemon_decode* out, size_t struct_size) {
  if (session == nullptr || out == nullptr) return NullArgument("session/out", nullptr);
  const stoker::Session::DaemonDecode d = session->session->daemon_decode();
  stoker_daemon_decode full{};
  full.samples = d.samples;
  full.nanos = d.nanos;
  full.threads = d.threads;
  full.share = d.share;
  std::memcpy(out, &full, std::min(struct_size, sizeof(full)));
  return STOKER_OK;
}

int stoker_next(stoker_session* session, double timeout_seconds,
                stoker_batch** out, stoker_error* err) {
  return stoker_next_in_epoch(session, UINT64_MAX, timeout_seconds, out, err);
}

int stoker_next_in_epoch(stoker_session* session, uint64_t epoch, double timeout_seconds,
                         stoker_batch** out, stoker_error* err) {
  if (session == nullptr) return NullArgument("session", err);
  if (out == nullptr) return NullArgument("out", err);
  auto b = session->session->NextInEpoch(epoch, Timeout(timeout_seconds));
  if (!b.ok()) return Report(b.status(), err);
  *out = new stoker_batch{*std::move(b)};
  return STOKER_OK;
}

int stoker_session_batches_per_epoch(stoker_session* session, double timeout_seconds,
                                     uint64_t* out, stoker_error* err) {
  if (session == nullptr) return NullArgument("session", err);
  if (out == nullptr) return NullArgument("out", err);
  absl::StatusOr<uint64_t> n = session->session->WaitBatchesPerEpoch(Timeout(timeout_seconds));
  if (!n.ok()) return Report(n.status(), err);
  *out = *n;
  return STOKER_OK;
}

int stoker_session_close(stoker_session* session, stoker_error* err) {
  if (session == nullptr) return NullArgument("session", err);
  absl::Status s = session->session->Close();
  return s.ok() ? STOKER_OK : Report(s, err);
}

void stoker_session_free(stoker_session* session) { delete session; }

int stoker_batch_get_info(const stoker_batch* batch, stoker_batch_info* info,
                          size_t struct_size) {
  if (batch == nullptr || info == nullptr) return NullArgument("batch/info", nullptr);
  stoker_batch_info full{};
  const stoker::Batch& b = batch->batch;
  const stoker::BatchField first = b.field(0);
  full.data = first.data;
  full.size_bytes = first.size_bytes;
  full.sample_bytes = first.sample_bytes;
  full.dtype = first.dtype;
  if (first.shape.size() <= 3) {
    full.ndim = static_cast<uint32_t>(1 + first.shape.size());
    full.shape[0] = b.samples();
    std::copy(first.shape.begin(), first.shape.end(), full.shape + 1);
  }
  full.samples = b.samples();
  full.error_count = b.error_count();
  full.labels = b.labels();
  full.status = b.status();
  full.indices = b.indices();
  full.epoch = b.epoch();
  full.batch_index = b.batch_index();
  full.sequence = b.sequence();
  full.mapping_base = b.mapping_base();
  full.mapping_size = b.mapping_size();
  full.copied = b.copied() ? 1 : 0;
  std::memcpy(info, &full, std::min(struct_size, sizeof(full)));
  return STOKER_OK;
}

uint32_t stoker_batch_field_count(const stoker_batch* batch) {
  return batch == nullptr ? 0 : static_cast<uint32_t>(batch->batch.field_count());
}

int stoker_batch_get_field(const stoker_batch* batch, uint32_t index,
                           stoker_field_info* info, size_t struct_size) {
  if (batch == nullptr || info == nullptr) return NullArgument("batch/info", nullptr);
  const stoker::Batch& b = batch->batch;
  if (index >= static_cast<uint32_t>(b.field_count())) {
    return 3;  // INVALID_ARGUMENT
  }
  const stoker::BatchField f = b.field(static_cast<int>(index));
  stoker_field_info full{};
  full.name = f.name.data();  // NUL-terminated in the validated layout copy.
  full.data = f.data;
  full.size_bytes = f.size_bytes;
  full.sample_bytes = f.sample_bytes;
  full.dtype = f.dtype;
  full.ndim = static_cast<uint32_t>(1 + f.shape.size());
  full.shape[0] = b.samples();
  std::copy(f.shape.begin(), f.shape.end(), full.shape + 1);
  full.slab = f.slab;
  std::memcpy(info, &full, std::min(struct_size, sizeof(full)));
  return STOKER_OK;
}

void stoker_batch_release(stoker_batch* batch) { delete batch; }

int stoker_stats_json(stoker_client* client, char** json_out,
                      stoker_error* err) {
  if (client == nullptr) return NullArgument("client", err);
  if (json_out == nullptr) return NullArgument("json_out", err);
  auto stats = client->client->GetStats();
  if (!stats.ok()) return Report(stats.status(), err);
  *json_out = CopyString(stoker::ProtoToJson(*stats));
  return STOKER_OK;
}

int stoker_health(stoker_client* client, stoker_error* err) {
  if (client == nullptr) return NullArgument("client", err);
  absl::Status s = client->client->CheckHealth();
  return s.ok() ? STOKER_OK : Report(s, err);
}

void stoker_string_free(char* s) { std::free(s); }

void stoker_checksum_init(stoker_checksum* c) {
  c->state = stoker::Checksum().state();
}

void stoker_checksum_update(stoker_checksum* c, const void* data, size_t n) {
  stoker::Checksum sum(c->state);
  sum.Update(data, n);
  c->state = sum.state();
}

uint64_t stoker_checksum_value(const stoker_checksum* c) {
  return stoker::Checksum(c->state).value();
}

}  // extern "C"
