// foo's kernels in kineto's trace: the PrivateUse1 activity profiler.
//
// torch.profiler.profile(activities=[CPU, PrivateUse1]) (and use_device="foo" with
// use_kineto=True) asks kineto for device activity. kineto runs the sessions of every
// registered IActivityProfiler beside its own; this one turns the kernel records of
// profiler.cpp into CONCURRENT_KERNEL activities ("foo::mm" on device row foo:N, stream row S)
// linked to the op that launched them, so the profiler's tables attribute their device time to
// that op and the Chrome trace shows them on the device's timeline.
//
// Built only against a torch with kineto (build.rs defines FOO_RS_KINETO from the probe); the
// header it needs compiles its declarations only under USE_KINETO, which torch's own build
// defines and an extension has to define for itself.
#if FOO_RS_KINETO

#ifndef USE_KINETO
#define USE_KINETO 1
#endif
// kineto's headers format metadata with fmt, whose compiled half torch does not export.
#define FMT_HEADER_ONLY 1

#include <libkineto.h>
#include <output_base.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common.h"
#include "profiler_records.h"

namespace foo::prof {
namespace {

using libkineto::ActivityType;

class FooProfilerSession final : public libkineto::IActivityProfilerSession {
 public:
  FooProfilerSession() : buffer_(std::make_unique<libkineto::CpuTraceBuffer>()) {
    buffer_->span = libkineto::TraceSpan(0, 0, "foo kernels");
    buffer_->gpuOpCount = -1;
  }

  void start() override {
    start_collecting();
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    records_ = stop_collecting();
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override { return {}; }

  void processTrace(libkineto::ActivityLogger& logger) override { processTrace(logger, nullptr, 0, 0); }

  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback linked_activity,
                    int64_t window_start, int64_t window_end) override {
    int64_t first = 0, last = 0;
    for (const KernelRecord& r : records_) {
      // kineto's capture window, where it gives one: a kernel outside it is not in the trace.
      if (window_end > window_start && (r.end_ns < window_start || r.start_ns > window_end)) continue;
      auto act = std::make_unique<libkineto::GenericTraceActivity>(buffer_->span, ActivityType::CONCURRENT_KERNEL,
                                                                     std::string("foo::") + r.op);
      act->startTime = r.start_ns;
      act->endTime = r.end_ns;
      act->device = r.device;
      act->resource = r.stream;
      act->threadId = r.thread;
      act->id = ++kernels_;  // the kernel's own id; the op it belongs to is `linked`
      if (linked_activity && r.correlation != 0) act->linked = linked_activity(static_cast<int32_t>(r.correlation));
      act->addMetadata("device", r.device);
      act->addMetadata("stream", r.stream);
      act->log(logger);
      first = first == 0 ? r.start_ns : std::min(first, r.start_ns);
      last = std::max(last, r.end_ns);
      devices_.insert(r.device);
      streams_.insert({r.device, r.stream});
      buffer_->activities.push_back(std::move(act));
    }
    buffer_->span.startTime = first;
    buffer_->span.endTime = last;
    records_.clear();
  }

  // The trace viewer's label for the device rows (kineto takes one per session).
  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    const int device = devices_.empty() ? 0 : *devices_.begin();
    return std::make_unique<libkineto::DeviceInfo>(
        libkineto::DeviceInfo{device, device, "foo", "foo:" + std::to_string(device) + " (foo_rs kernels)"});
  }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::vector<libkineto::ResourceInfo> out;
    for (const auto& [device, stream] : streams_) {
      out.push_back(libkineto::ResourceInfo{stream, stream, device, "foo:" + std::to_string(device) + " stream " +
                                                                        std::to_string(stream)});
    }
    return out;
  }

  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return std::move(buffer_); }

  void pushCorrelationId(uint64_t id) override { push_correlation(id); }
  void popCorrelationId() override { pop_correlation(); }

 private:
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_;
  std::vector<KernelRecord> records_;
  int32_t kernels_ = 0;
  std::set<int> devices_;
  std::set<std::pair<int, int64_t>> streams_;
};

class FooActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }

  const std::set<ActivityType>& availableActivities() const override { return activities_; }

  // A session only when device kernels were asked for (a CPU-only profile gets none).
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<ActivityType>& activity_types,
                                                                 const libkineto::Config& /*config*/) override {
    if (activity_types.count(ActivityType::CONCURRENT_KERNEL) == 0) return nullptr;
    return std::make_unique<FooProfilerSession>();
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t /*ts_ms*/, int64_t /*duration_ms*/,
                                                                 const std::set<ActivityType>& activity_types,
                                                                 const libkineto::Config& config) override {
    return configure(activity_types, config);
  }

 private:
  std::string name_{"foo_rs"};
  std::set<ActivityType> activities_{ActivityType::CONCURRENT_KERNEL};
};

}  // namespace

REGISTER_PRIVATEUSE1_PROFILER(FooActivityProfiler);

}  // namespace foo::prof

#endif  // FOO_RS_KINETO
