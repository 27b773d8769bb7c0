// Memory history: what torch.foo.memory._record_memory_history records and _snapshot returns,
// in the shape of torch.cuda.memory's (segments with their blocks and the stack traces that
// allocated them; per-device traces of alloc/free/segment events), and the allocator's reports
// to the profiler (profile_memory=True, memory timeline).
//
// The Rust allocator owns the blocks; it tells this file about segments it obtains or releases
// (foo_set_segment_observer, called under the allocator's lock, so this file never calls into
// the allocator while holding its own lock). Stack traces are torch's CapturedTraceback (Python,
// TorchScript and optionally C++ frames), gathered outside both locks.
//
// Python reaches it through two operators of the foo_rs namespace: _record_memory_history and
// _memory_snapshot, which returns the snapshot as JSON for device_module/memory.py to shape.
#include <c10/core/Allocator.h>
#include <c10/util/ApproximateClock.h>
#include <torch/csrc/profiler/combined_traceback.h>
#include <torch/library.h>

#include <atomic>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common.h"
#include "memory_history.h"

namespace foo::memory {
namespace {

using Traceback = std::shared_ptr<torch::CapturedTraceback>;

enum class Action { Alloc, FreeRequested, FreeCompleted, SegmentAlloc, SegmentFree, Oom, Snapshot };
constexpr const char* kActionNames[] = {"alloc",         "free_requested", "free_completed", "segment_alloc",
                                        "segment_free", "oom",            "snapshot"};

struct Entry {
  Action action;
  c10::DeviceIndex device;
  uint64_t addr;
  uint64_t size;
  int64_t time_us;
  Traceback frames;
  uint64_t device_free = 0;  // oom only
};

// What to record (torch.cuda.memory._record_memory_history's arguments).
enum class Enabled { None, State, All };
enum class Context { None, State, Alloc, All };

struct History {
  std::mutex mutex;
  Enabled enabled = Enabled::None;
  Context context = Context::None;
  bool cpp = false;
  size_t max_entries = SIZE_MAX;
  std::set<Action> skip;
  std::vector<Entry> trace;  // a ring of max_entries once full; `next` is the oldest then
  size_t next = 0;
  std::unordered_map<uint64_t, Traceback> live;      // live block -> its allocation's traceback
  std::unordered_map<uint64_t, Traceback> segments;  // segment -> traceback of the call that made it
};

History& history() {
  static History* h = new History();  // never destroyed: frees may run during process exit
  return *h;
}

std::atomic<bool> g_recording{false};

// The segment a foo_alloc of this thread just obtained (reported by the observer, under the
// allocator's lock), recorded with the allocation's traceback once foo_alloc returns.
struct PendingSegment {
  bool valid = false;
  c10::DeviceIndex device = 0;
  uint64_t addr = 0, size = 0;
};
thread_local PendingSegment t_pending;

int64_t now_us() { return c10::getTime() / 1000; }

void push(History& h, Entry e) {
  if (h.enabled != Enabled::All || h.skip.count(e.action) != 0 || h.max_entries == 0) return;
  if (h.trace.size() < h.max_entries) {
    h.trace.push_back(std::move(e));
  } else {
    h.trace[h.next] = std::move(e);
    h.next = (h.next + 1) % h.max_entries;
  }
}

Traceback gather(bool wanted) {
  if (!wanted) return nullptr;
  return torch::CapturedTraceback::gather(/*python=*/true, /*script=*/true, /*cpp=*/history().cpp);
}

void segment_observer(int32_t event, int32_t device, size_t addr, size_t size) noexcept {
  if (!g_recording.load(std::memory_order_relaxed)) return;
  if (event == FOO_SEGMENT_EVENT_ALLOC) {
    t_pending = {true, static_cast<c10::DeviceIndex>(device), addr, size};
    return;
  }
  try {
    History& h = history();
    std::lock_guard<std::mutex> lock(h.mutex);
    h.segments.erase(addr);
    push(h, {Action::SegmentFree, static_cast<c10::DeviceIndex>(device), addr, size, now_us(), nullptr});
  } catch (...) {
    // Out of memory while recording: the event is lost, the allocator is not disturbed.
  }
}

void report_to_profiler(void* ptr, int64_t delta, c10::DeviceIndex device) {
  FooMemoryStats s{};
  if (foo_memory_stats(device, &s) != FOO_STATUS_OK) return;
  c10::reportMemoryUsageToProfiler(ptr, delta, static_cast<size_t>(s.allocated_bytes.all.current),
                                   static_cast<size_t>(s.reserved_bytes.all.current), c10::Device(kFoo, device));
}

}  // namespace

bool observed() noexcept { return g_recording.load(std::memory_order_relaxed) || c10::memoryProfilingEnabled(); }

void on_alloc(void* ptr, c10::DeviceIndex device) noexcept {
  try {
    int32_t d = 0;
    size_t size = 0, requested = 0;
    if (foo_block_info(ptr, &d, &size, &requested) != FOO_STATUS_OK) return;
    if (c10::memoryProfilingEnabled()) report_to_profiler(ptr, static_cast<int64_t>(size), device);
    if (!g_recording.load(std::memory_order_relaxed)) return;
    History& h = history();
    Context context;
    {
      std::lock_guard<std::mutex> lock(h.mutex);
      context = h.context;
    }
    Traceback tb = gather(context != Context::None);
    const PendingSegment segment = std::exchange(t_pending, PendingSegment{});
    std::lock_guard<std::mutex> lock(h.mutex);
    if (h.enabled == Enabled::None) return;
    const Traceback in_trace = h.context >= Context::Alloc ? tb : nullptr;
    const int64_t t = now_us();
    if (segment.valid) {
      h.segments[segment.addr] = tb;
      push(h, {Action::SegmentAlloc, segment.device, segment.addr, segment.size, t, in_trace});
    }
    h.live[reinterpret_cast<uint64_t>(ptr)] = tb;
    push(h, {Action::Alloc, device, reinterpret_cast<uint64_t>(ptr), size, t, in_trace});
  } catch (...) {
  }
}

FreeNote before_free(void* ptr) noexcept {
  FreeNote note;
  try {
    int32_t d = 0;
    size_t size = 0, requested = 0;
    if (foo_block_info(ptr, &d, &size, &requested) != FOO_STATUS_OK) return note;
    note = {true, static_cast<c10::DeviceIndex>(d), size};
    if (!g_recording.load(std::memory_order_relaxed)) return note;
    History& h = history();
    Context context;
    {
      std::lock_guard<std::mutex> lock(h.mutex);
      context = h.context;
    }
    Traceback tb = gather(context == Context::All);
    std::lock_guard<std::mutex> lock(h.mutex);
    const auto addr = reinterpret_cast<uint64_t>(ptr);
    h.live.erase(addr);
    const int64_t t = now_us();
    push(h, {Action::FreeRequested, note.device, addr, size, t, tb});
    push(h, {Action::FreeCompleted, note.device, addr, size, t, tb});
  } catch (...) {
  }
  return note;
}

void after_free(void* ptr, const FreeNote& note) noexcept {
  if (!note.known || !c10::memoryProfilingEnabled()) return;
  try {
    report_to_profiler(ptr, -static_cast<int64_t>(note.size), note.device);
  } catch (...) {
  }
}

void on_oom(c10::DeviceIndex device, size_t nbytes) noexcept {
  try {
    FooMemoryStats s{};
    size_t free_bytes = 0, total = 0;
    const bool have_stats = foo_memory_stats(device, &s) == FOO_STATUS_OK;
    if (foo_memory_info(device, &free_bytes, &total) != FOO_STATUS_OK) free_bytes = 0;
    if (have_stats && c10::memoryProfilingEnabled()) {
      c10::reportOutOfMemoryToProfiler(static_cast<int64_t>(nbytes), static_cast<size_t>(s.allocated_bytes.all.current),
                                       static_cast<size_t>(s.reserved_bytes.all.current), c10::Device(kFoo, device));
    }
    if (!g_recording.load(std::memory_order_relaxed)) return;
    History& h = history();
    Context context;
    {
      std::lock_guard<std::mutex> lock(h.mutex);
      context = h.context;
    }
    Traceback tb = gather(context >= Context::Alloc);
    std::lock_guard<std::mutex> lock(h.mutex);
    Entry e{Action::Oom, device, 0, nbytes, now_us(), tb};
    e.device_free = free_bytes;
    push(h, std::move(e));
  } catch (...) {
  }
}

namespace {

Action parse_action(const std::string& name) {
  for (size_t i = 0; i < std::size(kActionNames); ++i) {
    if (name == kActionNames[i]) return static_cast<Action>(i);
  }
  TORCH_CHECK_VALUE(false, "_record_memory_history: unknown action '", name,
                    "' in skip_actions (one of alloc, free_requested, free_completed, segment_alloc, segment_free, "
                    "oom, snapshot)");
}

void record_memory_history(std::optional<std::string> enabled, std::optional<std::string> context,
                           std::string stacks, int64_t max_entries, bool clear_history,
                           std::vector<std::string> skip_actions) {
  Enabled e = Enabled::None;
  if (enabled) {
    TORCH_CHECK_VALUE(*enabled == "state" || *enabled == "all",
                      "_record_memory_history: enabled must be None, 'state' or 'all', not '", *enabled, "'");
    e = *enabled == "all" ? Enabled::All : Enabled::State;
  }
  Context c = Context::None;
  if (context) {
    if (*context == "state") {
      c = Context::State;
    } else if (*context == "alloc") {
      c = Context::Alloc;
    } else if (*context == "all") {
      c = Context::All;
    } else {
      TORCH_CHECK_VALUE(false, "_record_memory_history: context must be None, 'state', 'alloc' or 'all', not '",
                        *context, "'");
    }
  }
  TORCH_CHECK_VALUE(stacks == "python" || stacks == "all",
                    "_record_memory_history: stacks must be 'python' or 'all', not '", stacks, "'");
  TORCH_CHECK_VALUE(max_entries >= 0, "_record_memory_history: max_entries must be >= 0, got ", max_entries);
  std::set<Action> skip;
  for (const auto& name : skip_actions) skip.insert(parse_action(name));

  History& h = history();
  {
    std::lock_guard<std::mutex> lock(h.mutex);
    h.enabled = e;
    h.context = e == Enabled::None ? Context::None : c;
    h.cpp = stacks == "all";
    h.skip = std::move(skip);
    // As torch.cuda's: the recorded events stay (in snapshots) until clear_history, or until a
    // new ring size, which reorders them.
    if (clear_history || static_cast<size_t>(max_entries) != h.max_entries) {
      h.trace.clear();
      h.next = 0;
    }
    h.max_entries = static_cast<size_t>(max_entries);
    if (e == Enabled::None) {
      // Unlike torch.cuda's, the tracebacks of live blocks go too: frees are not followed while
      // off, so a kept traceback could later be shown for another block at the same address.
      h.live.clear();
      h.segments.clear();
    }
  }
  g_recording.store(e != Enabled::None);
  foo_set_segment_observer(e != Enabled::None ? &segment_observer : nullptr);
}

// ---- the snapshot, as JSON -------------------------------------------------------------------

void json_string(std::ostringstream& out, const std::string& s) {
  out << '"';
  for (const unsigned char ch : s) {
    switch (ch) {
      case '"':
        out << "\\\"";
        break;
      case '\\':
        out << "\\\\";
        break;
      case '\n':
        out << "\\n";
        break;
      case '\r':
        out << "\\r";
        break;
      case '\t':
        out << "\\t";
        break;
      default:
        if (ch < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", ch);
          out << buf;
        } else {
          out << ch;
        }
    }
  }
  out << '"';
}

// Deduplicates tracebacks so that each is symbolized once; index -1 is "no frames".
struct Tracebacks {
  std::vector<torch::CapturedTraceback*> list;
  std::map<torch::CapturedTraceback*, size_t> index;
  std::vector<Traceback> keep;  // alive until symbolized

  int64_t add(const Traceback& tb) {
    if (!tb) return -1;
    auto [it, inserted] = index.emplace(tb.get(), list.size());
    if (inserted) {
      list.push_back(tb.get());
      keep.push_back(tb);
    }
    return static_cast<int64_t>(it->second);
  }
};

void block_visitor(void* ctx, const FooBlock* b) { static_cast<std::vector<FooBlock>*>(ctx)->push_back(*b); }

std::string memory_snapshot(bool include_traces) {
  std::vector<FooBlock> blocks;
  check(foo_memory_blocks(&block_visitor, &blocks), "foo memory snapshot");

  History& h = history();
  Tracebacks tbs;
  std::vector<int64_t> block_tb(blocks.size(), -1), segment_tb(blocks.size(), -1);
  std::vector<Entry> trace;
  {
    std::lock_guard<std::mutex> lock(h.mutex);
    for (size_t i = 0; i < blocks.size(); ++i) {
      if (blocks[i].live) {
        const auto it = h.live.find(blocks[i].addr);
        if (it != h.live.end()) block_tb[i] = tbs.add(it->second);
      }
      const auto seg = h.segments.find(blocks[i].addr);
      if (seg != h.segments.end()) segment_tb[i] = tbs.add(seg->second);
    }
    push(h, {Action::Snapshot, 0, 0, 0, now_us(), nullptr});
    if (include_traces) {
      trace.reserve(h.trace.size());
      for (size_t i = 0; i < h.trace.size(); ++i) trace.push_back(h.trace[(h.next + i) % h.trace.size()]);
    }
  }
  std::vector<int64_t> entry_tb(trace.size());
  for (size_t i = 0; i < trace.size(); ++i) entry_tb[i] = tbs.add(trace[i].frames);

  const torch::SymbolizedTracebacks symbolized = torch::symbolize(tbs.list);

  std::ostringstream out;
  out << "{\"frames\":[";
  for (size_t i = 0; i < symbolized.all_frames.size(); ++i) {
    const auto& f = symbolized.all_frames[i];
    out << (i ? "," : "") << "{\"filename\":";
    json_string(out, f.filename);
    out << ",\"line\":" << f.lineno << ",\"name\":";
    json_string(out, f.funcname);
    out << "}";
  }
  out << "],\"tracebacks\":[";
  for (size_t i = 0; i < symbolized.tracebacks.size(); ++i) {
    out << (i ? "," : "") << "[";
    for (size_t j = 0; j < symbolized.tracebacks[i].size(); ++j) out << (j ? "," : "") << symbolized.tracebacks[i][j];
    out << "]";
  }
  out << "],\"segments\":[";
  for (size_t i = 0; i < blocks.size(); ++i) {
    const FooBlock& b = blocks[i];
    const size_t used = b.live ? b.size : 0;
    out << (i ? "," : "") << "{\"device\":" << b.device << ",\"address\":" << b.addr << ",\"total_size\":" << b.size
        << ",\"allocated_size\":" << used << ",\"active_size\":" << used
        << ",\"requested_size\":" << (b.live ? b.requested : 0) << ",\"segment_type\":\""
        << (b.size < (1u << 20) ? "small" : "large") << "\",\"traceback\":" << segment_tb[i]
        << ",\"block\":{\"address\":" << b.addr << ",\"size\":" << b.size
        << ",\"requested_size\":" << (b.live ? b.requested : 0) << ",\"state\":\""
        << (b.live ? "active_allocated" : "inactive") << "\",\"traceback\":" << block_tb[i] << "}}";
  }
  out << "],\"trace\":[";
  for (size_t i = 0; i < trace.size(); ++i) {
    const Entry& e = trace[i];
    out << (i ? "," : "") << "{\"action\":\"" << kActionNames[static_cast<int>(e.action)]
        << "\",\"device\":" << static_cast<int>(e.device) << ",\"addr\":" << e.addr << ",\"size\":" << e.size
        << ",\"time_us\":" << e.time_us << ",\"traceback\":" << entry_tb[i];
    if (e.action == Action::Oom) out << ",\"device_free\":" << e.device_free;
    out << "}";
  }
  out << "]}";
  return out.str();
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(foo_rs, m) {
  m.def(
      "_record_memory_history(str? enabled, str? context, str stacks, int max_entries, bool clear_history, "
      "str[] skip_actions) -> ()",
      &record_memory_history);
  m.def("_memory_snapshot(bool include_traces) -> str", &memory_snapshot);
}

}  // namespace foo::memory
