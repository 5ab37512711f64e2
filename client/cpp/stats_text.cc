#include "client/cpp/stats_text.h"

#include "absl/strings/str_format.h"
#include "proto/spec_util.h"

namespace stoker {

std::string StatsText(const v1::DaemonStats& s) {
  std::string out;
  absl::StrAppendFormat(&out, "stokerd pid %u, version %s, up %.0f s, %u decode threads, numa %s\n",
                        s.pid(), s.version().c_str(), s.uptime_seconds(), s.decode_threads(),
                        s.numa().c_str());
  absl::StrAppendFormat(&out, "samples decoded %llu, failed %llu, bytes read %llu, batches %llu\n",
                        (unsigned long long)s.samples_decoded(),
                        (unsigned long long)s.samples_failed(), (unsigned long long)s.bytes_read(),
                        (unsigned long long)s.batches_published());
  absl::StrAppendFormat(&out, "sessions open %d, opened %llu, closed %llu, reclaimed %llu\n",
                        s.sessions_size(), (unsigned long long)s.sessions_opened(),
                        (unsigned long long)s.sessions_closed(),
                        (unsigned long long)s.sessions_reclaimed());
  if (s.transform_latency().count() > 0) {
    auto ms = [](const v1::Histogram& h) { return h.count() ? 1e3 * h.sum() / h.count() : 0.0; };
    absl::StrAppendFormat(&out,
                          "per decoded sample: fetch %.3f ms, decode %.3f ms, "
                          "resize+write %.3f ms (%llu samples)\n",
                          ms(s.read_latency()), ms(s.decode_latency()), ms(s.transform_latency()),
                          (unsigned long long)s.transform_latency().count());
  }
  const v1::ReaderStats& r = s.reader();
  absl::StrAppendFormat(&out,
                        "reader: %u threads, %llu source reads (%llu bytes, %llu errors), "
                        "mean %.1f ms, max %.1f ms, %llu joined\n",
                        r.threads(), (unsigned long long)r.source_reads(),
                        (unsigned long long)r.source_bytes(), (unsigned long long)r.source_errors(),
                        r.source_reads() ? 1e3 * r.read_seconds_total() / r.source_reads() : 0.0,
                        1e3 * r.read_seconds_max(), (unsigned long long)r.joined_reads());
  for (const v1::TierStats& t : s.tiers()) {
    if (!t.enabled()) {
      absl::StrAppendFormat(&out, "%-8s off\n", t.tier().c_str());
      continue;
    }
    const uint64_t lookups = t.hits() + t.misses() + t.stale() + t.corrupt();
    absl::StrAppendFormat(
        &out,
        "%-8s hits %llu, misses %llu (%.1f%% hit), %llu entries, "
        "%.1f/%.1f MiB, evictions %llu",
        t.tier().c_str(), (unsigned long long)t.hits(), (unsigned long long)(lookups - t.hits()),
        lookups ? 100.0 * t.hits() / lookups : 0.0, (unsigned long long)t.entries(),
        t.bytes() / 1048576.0, t.capacity_bytes() / 1048576.0, (unsigned long long)t.evictions());
    if (t.tier() == "l2") {
      absl::StrAppendFormat(&out,
                            ", stale %llu, corrupt %llu, writer queue %llu/%llu, "
                            "drops %llu%s",
                            (unsigned long long)t.stale(), (unsigned long long)t.corrupt(),
                            (unsigned long long)t.writer_queue_depth(),
                            (unsigned long long)t.writer_queue_max(),
                            (unsigned long long)t.writer_drops(), t.map_full() ? ", MAP FULL" : "");
    }
    if (t.tier() == "pixels") {
      absl::StrAppendFormat(&out, ", %llu decoded", (unsigned long long)s.pixel_cache_decodes());
    }
    if (t.tier() == "volumes") {
      absl::StrAppendFormat(&out, ", %llu decoded, %llu reads too large for it",
                            (unsigned long long)s.volume_cache_decodes(),
                            (unsigned long long)s.volume_cache_oversized());
    }
    out += "\n";
  }
  for (const v1::WarmJob& j : s.warm_jobs()) {
    absl::StrAppendFormat(&out, "  warm job %llu: %s, %llu/%llu%s\n",
                          (unsigned long long)j.job_id(), j.dataset().c_str(),
                          (unsigned long long)j.done(), (unsigned long long)j.total(),
                          j.finished() ? " done" : "");
  }
  for (const v1::Opening& o : s.openings()) {
    absl::StrAppendFormat(&out, "  opening (uid %u) %s\n", o.uid(), o.summary().c_str());
  }
  for (const v1::PoolStats& p : s.pools()) {
    absl::StrAppendFormat(&out, "pool %-9s %u threads, %.0f%% busy, %llu queued",
                          PoolLabel(p).c_str(), p.threads(), 100 * p.busy_fraction(),
                          (unsigned long long)p.queued());
    if (p.has_node()) {
      absl::StrAppendFormat(&out, ", %llu spilled in, CPUs %s", (unsigned long long)p.spilled_in(),
                            p.cpus().empty() ? "any" : p.cpus().c_str());
    }
    out += "\n";
  }
  for (const v1::SessionStats& ss : s.sessions()) {
    absl::StrAppendFormat(&out,
                          "  session %llu pid %u: %s, %llu batches, %llu failed, ring %u/%u, "
                          "client waited %.1f s, %s, node %d (%s; ring memory node %d, "
                          "%llu spilled)\n",
                          (unsigned long long)ss.session_id(), ss.client_pid(),
                          ss.dataset().c_str(), (unsigned long long)ss.batches_published(),
                          (unsigned long long)ss.samples_failed(), ss.ring_ready(), ss.ring_slots(),
                          ss.client_wait_seconds(), DiagnosisName(ss.diagnosis()).c_str(),
                          ss.numa_node(), ss.placement().c_str(), ss.ring_memory_node(),
                          (unsigned long long)ss.samples_spilled());
    if (ss.pixel_mode() != v1::PIXEL_MODE_UNSPECIFIED) {
      absl::StrAppendFormat(&out, "    pixels %s: %s\n", PixelModeName(ss.pixel_mode()).c_str(),
                            ss.pixel_cache_why().c_str());
    }
    if (ss.remote_by_epoch_size() > 0) {
      absl::StrAppendFormat(&out, "    remote: %llu requests, %.1f MB",
                            (unsigned long long)ss.remote_requests(), ss.remote_bytes() / 1e6);
      for (const v1::EpochRemote& e : ss.remote_by_epoch()) {
        absl::StrAppendFormat(
            &out, "%s epoch %llu: %llu (%.1f MB)", &e == &ss.remote_by_epoch(0) ? ";" : ",",
            (unsigned long long)e.epoch(), (unsigned long long)e.requests(), e.bytes() / 1e6);
      }
      out += "\n";
    }
    if (ss.has_order()) {
      const v1::EpochOrder& o = ss.order();
      absl::StrAppendFormat(&out,
                            "    order: epoch %llu, %.2f of %u partitions a global step of "
                            "%llu, spread %.3f",
                            (unsigned long long)o.epoch(), o.partitions_per_step(), o.partitions(),
                            (unsigned long long)o.global_step(), o.spread());
      if (o.exchanged() > 0) {
        absl::StrAppendFormat(&out, ", exchange %llu a partition by %s",
                              (unsigned long long)o.exchanged(),
                              o.exchange_by_bytes() ? "bytes" : "count");
        if (o.exchange_over_budget() > 0) {
          absl::StrAppendFormat(&out, " (%u partitions past its bound)",
                                o.exchange_over_budget());
        }
      }
      out += "\n";
    }
    if (ss.has_cpu_share()) {
      absl::StrAppendFormat(&out,
                            "    client decode: the daemon decodes %.0f%% of each batch, %llu "
                            "samples handed to the client\n",
                            100 * ss.cpu_share(), (unsigned long long)ss.samples_client_decoded());
    }
  }
  return out;
}

}  // namespace stoker
