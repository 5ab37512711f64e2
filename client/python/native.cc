// _stoker: the Python binding of the C++ client (client/cpp/client.h), so
// there is one protocol implementation. It exposes Client, Session and Batch
// at the level of the C++ API; the `stoker` package builds the
// DataLoader-like Loader on top.
//
// Zero-copy: Batch.images / labels / status / indices are numpy arrays that
// view the ring slot and keep the Batch (and so the slot) alive through their
// `base`. The GIL is released while Session.next() waits.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "client/cpp/client.h"
#include "shm/ring_data.h"
#include "util/checksum.h"

namespace py = pybind11;

namespace stoker {
namespace {

// Set by the package at import: a callable (code_name, message) -> exception.
py::object& ErrorFactory() {
  static py::object* factory = new py::object();
  return *factory;
}

[[noreturn]] void Raise(const absl::Status& s) {
  std::string code = absl::StatusCodeToString(s.code());
  std::string msg(s.message());
  if (!ErrorFactory() || ErrorFactory().is_none()) {
    throw std::runtime_error(code + ": " + msg);
  }
  py::object exc = ErrorFactory()(code, msg);
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
  throw py::error_already_set();
}

template <typename T>
T Check(absl::StatusOr<T> v) {
  if (!v.ok()) Raise(v.status());
  return *std::move(v);
}

absl::Duration Timeout(const std::optional<double>& seconds) {
  return seconds ? absl::Seconds(*seconds) : absl::InfiniteDuration();
}

// A Batch held by Python; `released` drops the slot early.
struct PyBatch {
  Batch batch;
};

template <typename T>
py::array View(const std::shared_ptr<PyBatch>& self, const T* data,
               std::vector<py::ssize_t> shape) {
  // The array's base is the PyBatch, so the slot lives as long as any view.
  return py::array_t<T>(shape, data, py::cast(self));
}

py::dict StatsDict(const v1::DaemonStats& s) {
  py::dict d;
  d["pid"] = s.pid();
  d["version"] = s.version();
  d["uptime_seconds"] = s.uptime_seconds();
  d["decode_threads"] = s.decode_threads();
  d["sessions_opened"] = s.sessions_opened();
  d["sessions_closed"] = s.sessions_closed();
  d["sessions_reclaimed"] = s.sessions_reclaimed();
  d["samples_decoded"] = s.samples_decoded();
  d["samples_failed"] = s.samples_failed();
  d["bytes_read"] = s.bytes_read();
  d["batches_published"] = s.batches_published();
  d["metrics_port"] = s.metrics_port();
  py::list pools;
  for (const v1::PoolStats& p : s.pools()) {
    py::dict e;
    e["pool"] = p.pool();
    e["threads"] = p.threads();
    e["busy_fraction"] = p.busy_fraction();
    pools.append(e);
  }
  d["pools"] = pools;
  py::list sessions;
  for (const v1::SessionStats& ss : s.sessions()) {
    py::dict e;
    e["session_id"] = ss.session_id();
    e["dataset"] = ss.dataset();
    e["client_pid"] = ss.client_pid();
    e["batches_published"] = ss.batches_published();
    e["samples_decoded"] = ss.samples_decoded();
    e["samples_failed"] = ss.samples_failed();
    e["ring_slots"] = ss.ring_slots();
    e["ring_ready"] = ss.ring_ready();
    e["uptime_seconds"] = ss.uptime_seconds();
    e["diagnosis"] = ss.diagnosis();
    e["client_wait_seconds"] = ss.client_wait_seconds();
    e["batches_delivered"] = ss.batches_delivered();
    sessions.append(e);
  }
  d["sessions"] = sessions;
  return d;
}

v1::SessionSpec MakeSpec(const std::string& kind, const std::string& path,
                         const std::string& root, uint32_t batch_size,
                         const std::string& transform, uint32_t image_size,
                         bool shuffle, uint64_t seed, uint32_t rank,
                         uint32_t world_size, bool drop_last,
                         uint32_t ring_slots, uint64_t start_epoch,
                         uint64_t start_batch, const std::string& decode,
                         const std::string& dtype, const std::vector<float>& mean,
                         const std::vector<float>& std) {
  v1::SessionSpec spec;
  spec.set_dtype(dtype == "float32"   ? v1::FLOAT32
                 : dtype == "float16" ? v1::FLOAT16
                                      : v1::UINT8);
  for (float m : mean) spec.add_mean(m);
  for (float s : std) spec.add_std(s);
  spec.set_decode(decode == "full"   ? v1::DECODE_FULL
                  : decode == "crop" ? v1::DECODE_CROP
                  : decode == "scale_crop" ? v1::DECODE_SCALE_CROP
                                           : v1::DECODE_AUTO);
  spec.mutable_dataset()->set_kind(kind == "list" ? v1::DatasetSpec::LIST
                                                  : v1::DatasetSpec::FOLDER);
  spec.mutable_dataset()->set_path(path);
  spec.mutable_dataset()->set_root(root);
  spec.set_batch_size(batch_size);
  spec.set_transform(transform == "train" ? v1::TRAIN : v1::VAL);
  spec.set_image_size(image_size);
  spec.set_shuffle(shuffle);
  spec.set_seed(seed);
  spec.set_rank(rank);
  spec.set_world_size(world_size);
  spec.set_drop_last(drop_last);
  spec.set_ring_slots(ring_slots);
  spec.set_start_epoch(start_epoch);
  spec.set_start_batch(start_batch);
  return spec;
}

}  // namespace
}  // namespace stoker

PYBIND11_MODULE(_stoker, m) {
  using namespace stoker;
  m.doc() = "Native binding of the Stoker C++ client (use the stoker package).";

  m.def("_set_error_factory", [](py::object f) { ErrorFactory() = f; });

  py::class_<PyBatch, std::shared_ptr<PyBatch>>(m, "Batch")
      .def_property_readonly("images", [](const std::shared_ptr<PyBatch>& self) {
        const Batch& b = self->batch;
        if (b.dtype() == shm::kDTypeUint8) {
          return View<uint8_t>(self, b.data(),
                               {b.samples(), b.height(), b.width(), b.channels()});
        }
        // The array's base is the PyBatch, as for View().
        return py::array(py::dtype(b.dtype() == shm::kDTypeFloat32 ? "float32" : "float16"),
                         std::vector<py::ssize_t>{b.samples(), b.channels(),
                                                  b.height(), b.width()},
                         {}, b.data(), py::cast(self));
      }, "View of the slot's pixels (zero-copy): uint8 NHWC, or float32/"
         "float16 NCHW normalized.")
      .def_property_readonly("labels", [](const std::shared_ptr<PyBatch>& self) {
        return View<int32_t>(self, self->batch.labels(), {self->batch.samples()});
      })
      .def_property_readonly("status", [](const std::shared_ptr<PyBatch>& self) {
        return View<uint32_t>(self, self->batch.status(), {self->batch.samples()});
      }, "Per-sample status: 0 ok, 1 read error, 2 decode error.")
      .def_property_readonly("indices", [](const std::shared_ptr<PyBatch>& self) {
        return View<uint64_t>(self, self->batch.indices(), {self->batch.samples()});
      }, "Dataset sample index of each sample.")
      .def_property_readonly("samples", [](const PyBatch& b) { return b.batch.samples(); })
      .def_property_readonly("epoch", [](const PyBatch& b) { return b.batch.epoch(); })
      .def_property_readonly("batch_index", [](const PyBatch& b) { return b.batch.batch_index(); })
      .def_property_readonly("sequence", [](const PyBatch& b) { return b.batch.sequence(); })
      .def_property_readonly("error_count", [](const PyBatch& b) { return b.batch.error_count(); })
      .def_property_readonly("data_ptr", [](const PyBatch& b) {
        return reinterpret_cast<uintptr_t>(b.batch.data());
      })
      .def_property_readonly("mapping_base", [](const PyBatch& b) {
        return reinterpret_cast<uintptr_t>(b.batch.mapping_base());
      })
      .def_property_readonly("mapping_size", [](const PyBatch& b) { return b.batch.mapping_size(); });

  py::class_<Session>(m, "Session")
      .def("next", [](Session& s, std::optional<double> timeout) {
        absl::StatusOr<Batch> b;
        {
          py::gil_scoped_release release;
          b = s.Next(Timeout(timeout));
        }
        auto out = std::make_shared<PyBatch>();
        out->batch = Check(std::move(b));
        return out;
      }, py::arg("timeout") = py::none())
      .def("close", [](Session& s) {
        absl::Status st;
        {
          py::gil_scoped_release release;
          st = s.Close();
        }
        if (!st.ok()) Raise(st);
      })
      .def_property_readonly("id", &Session::id)
      .def_property_readonly("batches_per_epoch", [](const Session& s) { return s.info().batches_per_epoch(); })
      .def_property_readonly("samples_per_epoch", [](const Session& s) { return s.info().samples_per_epoch(); })
      .def_property_readonly("dataset_samples", [](const Session& s) { return s.info().dataset_samples(); })
      .def_property_readonly("num_classes", [](const Session& s) { return s.info().num_classes(); })
      .def_property_readonly("skipped_files", [](const Session& s) { return s.info().skipped_files(); });

  py::class_<Client>(m, "Client")
      .def(py::init([](const std::string& socket, double timeout) {
        absl::StatusOr<std::unique_ptr<Client>> c;
        {
          py::gil_scoped_release release;
          c = Client::Connect(socket, absl::Seconds(timeout));
        }
        return Check(std::move(c));
      }), py::arg("socket"), py::arg("timeout") = 5.0)
      .def("open_session", [](Client& c, const std::string& kind,
                              const std::string& path, const std::string& root,
                              uint32_t batch_size, const std::string& transform,
                              uint32_t image_size, bool shuffle, uint64_t seed,
                              uint32_t rank, uint32_t world_size, bool drop_last,
                              uint32_t ring_slots, uint64_t start_epoch,
                              uint64_t start_batch, const std::string& decode,
                              const std::string& dtype,
                              const std::vector<float>& mean,
                              const std::vector<float>& std) {
        v1::SessionSpec spec = MakeSpec(kind, path, root, batch_size, transform,
                                        image_size, shuffle, seed, rank,
                                        world_size, drop_last, ring_slots,
                                        start_epoch, start_batch, decode, dtype,
                                        mean, std);
        absl::StatusOr<std::unique_ptr<Session>> s;
        {
          py::gil_scoped_release release;
          s = c.OpenSession(spec);
        }
        return Check(std::move(s));
      }, py::arg("kind"), py::arg("path"), py::arg("root"), py::arg("batch_size"),
         py::arg("transform"), py::arg("image_size"), py::arg("shuffle"),
         py::arg("seed"), py::arg("rank"), py::arg("world_size"),
         py::arg("drop_last"), py::arg("ring_slots"), py::arg("start_epoch"),
         py::arg("start_batch"), py::arg("decode") = "auto",
         py::arg("dtype") = "uint8", py::arg("mean") = std::vector<float>(),
         py::arg("std") = std::vector<float>())
      .def("stats", [](Client& c) {
        absl::StatusOr<v1::DaemonStats> s;
        {
          py::gil_scoped_release release;
          s = c.GetStats();
        }
        return StatsDict(Check(std::move(s)));
      })
      .def("health", [](Client& c) {
        absl::Status s;
        {
          py::gil_scoped_release release;
          s = c.CheckHealth();
        }
        if (!s.ok()) Raise(s);
      })
      .def_property_readonly("socket", &Client::socket_path);

  py::class_<Checksum>(m, "Checksum",
                       "The order-sensitive content hash stokerctl prints.")
      .def(py::init<>())
      .def("update", [](Checksum& c, py::buffer b) {
        py::buffer_info info = b.request();
        c.Update(info.ptr, static_cast<size_t>(info.size * info.itemsize));
      })
      .def_property_readonly("hex", [](const Checksum& c) {
        char buf[17];
        std::snprintf(buf, sizeof(buf), "%016llx",
                      static_cast<unsigned long long>(c.value()));
        return std::string(buf);
      });
}
