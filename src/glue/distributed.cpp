// The c10d backend for foo tensors, `foo_gloo`: PyTorch's ProcessGroupGloo run on CPU tensors
// that alias the foo tensors' memory (foo memory is host memory), so gloo moves and reduces the
// data in place in foo storage, with no copy.
//
// Why C++ and not a Python c10d.Backend: PyTorch calls a Python backend through its PyBackend
// trampoline and wraps what it returns in a PyWorkHolder that forwards only wait() and
// get_future() (Work.is_completed() stays False), and each call costs a trip through Python.
// This backend is a plain c10d::Backend: DDP's reducer and dist.* call it directly, and the Work
// it returns is the one users get.
//
// Python sees it as foo_rs._C._distributed.ProcessGroupFooGloo, a pybind11 subclass of
// torch.distributed's Backend (pybind11's registry is shared with torch's, so a group's
// _get_backend() returns this type); python/foo_rs/distributed registers it with
// torch.distributed.
//
// gloo's rules, and what is done about them:
// - gloo reads and writes `numel` elements from a tensor's data pointer, whatever its strides: a
//   non-contiguous foo tensor goes through a contiguous foo stand-in, copied back once the
//   collective has finished.
// - gloo has a type for bool, uint8, int8, int32, int64, float16, bfloat16, float32 and float64
//   (and reduces complex): collectives that only move data carry the other dtypes as raw bytes.
// - gloo has no AVG: it sums, and the foo tensors are divided once the sum has landed.
#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/csrc/utils/pybind.h>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace foo {
namespace {

namespace py = pybind11;
using c10d::Work;
using WorkPtr = c10::intrusive_ptr<Work>;

constexpr const char* kBackendName = "foo_gloo";

// What gloo carries (ProcessGroupGloo's type switch; any other dtype is "Invalid scalar type"
// there, CPU tensors included) and what it reduces.
const std::vector<at::ScalarType> kGlooDtypes = {at::kBool,  at::kByte,     at::kChar,  at::kInt,   at::kLong,
                                                 at::kHalf,  at::kBFloat16, at::kFloat, at::kDouble};
const std::vector<at::ScalarType> kGlooComplex = {at::kComplexFloat, at::kComplexDouble};

bool contains(const std::vector<at::ScalarType>& list, at::ScalarType t) {
  return std::find(list.begin(), list.end(), t) != list.end();
}
bool gloo_carries(at::ScalarType t) { return contains(kGlooDtypes, t); }
bool gloo_reduces(at::ScalarType t) { return gloo_carries(t) || contains(kGlooComplex, t); }

bool is_foo(const at::Tensor& t) { return t.device().type() == c10::DeviceType::PrivateUse1; }

// A CPU tensor over `t`'s memory: `t`'s dtype, shape and strides, or (raw) its bytes as uint8
// with shape t.shape + (itemsize,). It holds `t`'s storage, so memory a collective still uses
// cannot go back to foo's allocator while gloo works on it (gloo's Work keeps the CPU tensors).
at::Tensor host_alias(const at::Tensor& t, bool raw) {
  if (!raw && !is_foo(t)) {
    return t;
  }
  std::vector<int64_t> sizes = t.sizes().vec();
  std::vector<int64_t> strides = t.strides().vec();
  if (raw) {
    const int64_t item = static_cast<int64_t>(t.element_size());
    for (auto& s : strides) {
      s *= item;
    }
    sizes.push_back(item);
    strides.push_back(1);
  }
  const auto options = at::TensorOptions().dtype(raw ? at::kByte : t.scalar_type()).device(at::kCPU);
  if (t.numel() == 0) {
    return at::empty_strided(sizes, strides, options);  // nothing to alias, nothing moves
  }
  c10::Storage keep = t.storage();
  return at::from_blob(
      t.data_ptr(), sizes, strides, [keep](void*) {}, options);
}

// What a collective's Work still has to do in foo memory once gloo is done (write strided
// results back, AVG's division), run exactly once, by whichever comes first: wait() or
// is_completed() on the caller's thread, or the chained future's callback on gloo's thread.
class Epilogue {
 public:
  explicit Epilogue(std::function<void()> run) : run_(std::move(run)) {}
  void run() {
    if (run_) {
      std::call_once(once_, run_);
    }
  }

 private:
  std::function<void()> run_;
  std::once_flag once_;
};

// Maps the tensors gloo was handed (CPU aliases, stand-ins) back to the caller's foo tensors, in
// gloo's results and future values, whatever their nesting (a list, a list of lists).
class Swaps {
 public:
  void add(const at::Tensor& given, const at::Tensor& user) { pairs_.emplace_back(given.unsafeGetTensorImpl(), user); }

  at::Tensor user(const at::Tensor& given) const {
    for (const auto& [impl, user] : pairs_) {
      if (impl == given.unsafeGetTensorImpl()) {
        return user;
      }
    }
    return given;
  }

  c10::IValue user(const c10::IValue& v) const {
    if (v.isTensor()) {
      return user(v.toTensor());
    }
    if (v.isTensorList()) {
      std::vector<at::Tensor> out;
      for (const at::Tensor& t : v.toTensorVector()) {
        out.push_back(user(t));
      }
      return out;
    }
    if (v.isList()) {
      c10::impl::GenericList out(v.toList().elementType());
      for (const c10::IValue& e : v.toList()) {
        out.push_back(user(e));
      }
      return out;
    }
    return v;
  }

 private:
  std::vector<std::pair<const c10::TensorImpl*, at::Tensor>> pairs_;
};

// The Work of one collective on foo tensors: gloo's, with the foo tensors as its result and its
// epilogue run before it reports completion (wait() returns, is_completed() is true). Its future,
// chained on gloo's when first asked for (DDP's reducer, comm hooks, users), completes after
// the epilogue, with the foo tensors as its value, and carries gloo's error; a synchronous
// collective never builds it. gloo's Works for send/recv have no future: get_future() raises
// for those as gloo's does on CPU tensors.
class FooWork : public Work {
 public:
  FooWork(WorkPtr gloo, std::shared_ptr<const Swaps> swaps, std::shared_ptr<Epilogue> epilogue)
      : Work(-1, gloo->retrieveOpType()), gloo_(std::move(gloo)), swaps_(std::move(swaps)), epilogue_(std::move(epilogue)) {}

  bool wait(std::chrono::milliseconds timeout) override {
    const bool finished = gloo_->wait(timeout);  // gloo's timeout and errors (a peer that died)
    epilogue_->run();  // done already if a chained future ran it (call_once waits for that run)
    return finished;
  }

  bool isCompleted() override {
    if (!gloo_->isCompleted()) {
      return false;
    }
    if (gloo_->isSuccess()) {
      epilogue_->run();  // completed means the results are in the foo tensors
    }
    return true;
  }

  bool isSuccess() const override { return gloo_->isSuccess(); }
  std::exception_ptr exception() const override { return gloo_->exception(); }
  int sourceRank() const override { return gloo_->sourceRank(); }

  std::vector<at::Tensor> result() override {
    std::vector<at::Tensor> out;
    for (const at::Tensor& t : gloo_->result()) {
      out.push_back(swaps_->user(t));
    }
    return out;
  }

  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
    std::lock_guard<std::mutex> lock(future_mutex_);
    if (!future_) {
      const auto inner = gloo_->getFuture();  // raises for send/recv, as gloo's
      future_ = inner->then(
          [swaps = swaps_, epilogue = epilogue_](c10::ivalue::Future& done) -> c10::IValue {
            const c10::IValue& value = done.value();  // re-raises gloo's error into the chained future
            epilogue->run();
            return swaps->user(value);
          },
          inner->elementType());
    }
    return future_;
  }

  void abort() override { gloo_->abort(); }

 private:
  WorkPtr gloo_;
  std::shared_ptr<const Swaps> swaps_;
  std::shared_ptr<Epilogue> epilogue_;
  std::mutex future_mutex_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// Builds one collective's gloo arguments from the caller's tensors by role (read, written, both)
// and its Work. `raw`: hand gloo the tensors' bytes (for collectives that only move data, when
// a dtype gloo has no type for is among them: one representation for the whole call, as gloo
// checks that the dtypes agree).
class Call {
 public:
  explicit Call(bool raw = false) : raw_(raw), swaps_(std::make_shared<Swaps>()) {}

  // A tensor gloo only reads.
  at::Tensor read(const at::Tensor& t) {
    return alias(t, is_foo(t) && !t.is_contiguous() ? t.contiguous() : t);
  }
  // A tensor gloo only writes.
  at::Tensor written(const at::Tensor& t) {
    if (is_foo(t) && !t.is_contiguous()) {
      at::Tensor stand_in = at::empty_like(t, at::MemoryFormat::Contiguous);
      write_back_.emplace_back(t, stand_in);
      return alias(t, stand_in);
    }
    return alias(t, t);
  }
  // A tensor gloo reads and then overwrites with the result (all_reduce, broadcast).
  at::Tensor both(const at::Tensor& t) {
    if (is_foo(t) && !t.is_contiguous()) {
      at::Tensor stand_in = t.contiguous();
      write_back_.emplace_back(t, stand_in);
      return alias(t, stand_in);
    }
    return alias(t, t);
  }

  template <class Role>
  at::Tensor each(const at::Tensor& t, Role role) {
    return (this->*role)(t);
  }
  template <class Role>
  std::vector<at::Tensor> each(const std::vector<at::Tensor>& ts, Role role) {
    std::vector<at::Tensor> out;
    out.reserve(ts.size());
    for (const at::Tensor& t : ts) {
      out.push_back((this->*role)(t));
    }
    return out;
  }
  template <class Role>
  std::vector<std::vector<at::Tensor>> each(const std::vector<std::vector<at::Tensor>>& tss, Role role) {
    std::vector<std::vector<at::Tensor>> out;
    out.reserve(tss.size());
    for (const auto& ts : tss) {
      out.push_back(each(ts, role));
    }
    return out;
  }

  // gloo's `work` as the collective's Work: strided results written back, then `after`.
  WorkPtr work(WorkPtr gloo, std::function<void()> after = {}) {
    std::function<void()> epilogue;
    if (!write_back_.empty() || after) {
      epilogue = [pairs = std::move(write_back_), after = std::move(after)] {
        at::NoGradGuard no_grad;
        for (const auto& [t, stand_in] : pairs) {
          t.copy_(stand_in);
        }
        if (after) {
          after();
        }
      };
    }
    return c10::make_intrusive<FooWork>(std::move(gloo), swaps_, std::make_shared<Epilogue>(std::move(epilogue)));
  }

 private:
  at::Tensor alias(const at::Tensor& user, const at::Tensor& given) {
    at::Tensor view = host_alias(given, raw_);
    swaps_->add(view, user);
    return view;
  }

  bool raw_;
  std::shared_ptr<Swaps> swaps_;
  std::vector<std::pair<at::Tensor, at::Tensor>> write_back_;  // (caller's tensor, contiguous stand-in)
};

using Tensors = std::vector<at::Tensor>;
using TensorLists = std::vector<std::vector<at::Tensor>>;
constexpr auto kRead = &Call::read;
constexpr auto kWritten = &Call::written;
constexpr auto kBoth = &Call::both;

// A dtype as Python spells it ("torch.int16"), for messages.
std::string dtype_name(at::ScalarType t) { return "torch." + std::string(c10::getDtypeNames(t).first); }

std::string reducible_names() {
  std::string names;
  for (const auto& list : {kGlooDtypes, kGlooComplex}) {
    for (at::ScalarType t : list) {
      names += (names.empty() ? "" : ", ") + std::string(c10::getDtypeNames(t).first);
    }
  }
  return names;
}

void check_reducible(const Tensors& tensors, const c10d::ReduceOp& op) {
  for (const at::Tensor& t : tensors) {
    TORCH_CHECK_TYPE(gloo_reduces(t.scalar_type()), kBackendName, ": gloo cannot reduce ", dtype_name(t.scalar_type()),
                     " tensors (it reduces ", reducible_names(),
                     "); broadcast, gather, scatter, all_gather, all_to_all and send/recv carry every foo dtype");
    TORCH_CHECK_TYPE(op != c10d::ReduceOp::AVG || t.is_floating_point() || t.is_complex(), kBackendName,
                     ": ReduceOp.AVG needs a floating-point tensor, got ", dtype_name(t.scalar_type()), "; use SUM");
  }
}

// The tensors of a collective's arguments (a tensor, a list, a list of lists), in one list.
void flatten_into(Tensors& all, const at::Tensor& t) { all.push_back(t); }
void flatten_into(Tensors& all, const Tensors& ts) { all.insert(all.end(), ts.begin(), ts.end()); }
void flatten_into(Tensors& all, const TensorLists& tss) {
  for (const auto& ts : tss) {
    flatten_into(all, ts);
  }
}
template <class... Groups>
Tensors flat(const Groups&... groups) {
  Tensors all;
  (flatten_into(all, groups), ...);
  return all;
}

template <class... Groups>
Call reducer(const c10d::ReduceOp& op, const Groups&... groups) {
  check_reducible(flat(groups...), op);
  return Call();
}

template <class... Groups>
Call mover(const Groups&... groups) {
  const Tensors all = flat(groups...);
  return Call(!std::all_of(all.begin(), all.end(), [](const at::Tensor& t) { return gloo_carries(t.scalar_type()); }));
}

c10d::ReduceOp sum_if_avg(const c10d::ReduceOp& op) {
  return op == c10d::ReduceOp::AVG ? c10d::ReduceOp(c10d::ReduceOp::SUM) : op;
}

template <class Opts>
Opts summing(const Opts& opts) {
  Opts o = opts;
  o.reduceOp = sum_if_avg(opts.reduceOp);
  return o;
}

}  // namespace

// Not in the anonymous namespace: pybind11 names the type, and a group's backend is returned to
// Python as this class.
class ProcessGroupFooGloo : public c10d::Backend {
 public:
  // `gloo` may be shared with the group's CPU backend (one connection per group, one order of
  // collectives across devices).
  explicit ProcessGroupFooGloo(c10::intrusive_ptr<c10d::Backend> gloo)
      : Backend(gloo->getRank(), gloo->getSize()), gloo_(std::move(gloo)) {
    TORCH_CHECK_TYPE(gloo_->getBackendName() == "gloo", "ProcessGroupFooGloo runs over a ProcessGroupGloo, got ",
                     gloo_->getBackendName());
  }

  const c10::intrusive_ptr<c10d::Backend>& gloo() const { return gloo_; }

  const std::string getBackendName() const override { return kBackendName; }
  c10::intrusive_ptr<Options> getBackendOptions() override { return gloo_->getBackendOptions(); }

  // -- reductions ------------------------------------------------------------------------------

  WorkPtr allreduce(Tensors& tensors, const c10d::AllreduceOptions& opts) override {
    return reducing_in_place(&c10d::Backend::allreduce, tensors, opts, true);
  }
  WorkPtr allreduce_coalesced(Tensors& tensors, const c10d::AllreduceCoalescedOptions& opts) override {
    return reducing_in_place(&c10d::Backend::allreduce_coalesced, tensors, opts, true);
  }
  WorkPtr reduce(Tensors& tensors, const c10d::ReduceOptions& opts) override {
    return reducing_in_place(&c10d::Backend::reduce, tensors, opts, opts.rootRank == getRank());
  }
  WorkPtr reduce_scatter(Tensors& outputs, TensorLists& inputs, const c10d::ReduceScatterOptions& opts) override {
    return reducing(&c10d::Backend::reduce_scatter, outputs, inputs, opts);
  }
  WorkPtr reduce_scatter_single(at::Tensor& output, at::Tensor& input,
                                const c10d::ReduceScatterOptions& opts) override {
    return reducing(&c10d::Backend::reduce_scatter_single, output, input, opts);
  }
  WorkPtr reduce_scatter_single_coalesced(Tensors& outputs, Tensors& inputs,
                                          const c10d::ReduceScatterOptions& opts) override {
    return reducing(&c10d::Backend::reduce_scatter_single_coalesced, outputs, inputs, opts);
  }

  // -- data movement (any dtype: raw bytes where gloo has no type) ----------------------------

  WorkPtr broadcast(Tensors& tensors, const c10d::BroadcastOptions& opts) override {
    Call call = mover(tensors);
    Tensors given = call.each(tensors, kBoth);
    return call.work(gloo_->broadcast(given, opts));
  }
  WorkPtr allgather(TensorLists& outputs, Tensors& inputs, const c10d::AllgatherOptions& opts) override {
    return moving(&c10d::Backend::allgather, outputs, inputs, opts);
  }
  WorkPtr all_gather_single(at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) override {
    return moving(&c10d::Backend::all_gather_single, output, input, opts);
  }
  WorkPtr allgather_coalesced(TensorLists& outputs, Tensors& inputs, const c10d::AllgatherOptions& opts) override {
    return moving(&c10d::Backend::allgather_coalesced, outputs, inputs, opts);
  }
  WorkPtr all_gather_single_coalesced(Tensors& outputs, Tensors& inputs,
                                      const c10d::AllgatherOptions& opts) override {
    return moving(&c10d::Backend::all_gather_single_coalesced, outputs, inputs, opts);
  }
  WorkPtr gather(TensorLists& outputs, Tensors& inputs, const c10d::GatherOptions& opts) override {
    return moving(&c10d::Backend::gather, outputs, inputs, opts);
  }
  WorkPtr scatter(Tensors& outputs, TensorLists& inputs, const c10d::ScatterOptions& opts) override {
    return moving(&c10d::Backend::scatter, outputs, inputs, opts);
  }
  WorkPtr alltoall(Tensors& outputs, Tensors& inputs, const c10d::AllToAllOptions& opts) override {
    return moving(&c10d::Backend::alltoall, outputs, inputs, opts);
  }
  WorkPtr all_to_all_single(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_split_sizes,
                            std::vector<int64_t>& input_split_sizes, const c10d::AllToAllOptions& opts) override {
    Call call = mover(output, input);
    at::Tensor out = call.written(output);
    at::Tensor in = call.read(input);
    return call.work(gloo_->all_to_all_single(out, in, output_split_sizes, input_split_sizes, opts));
  }

  // -- point to point (gloo's send/recv Works have no future) ---------------------------------

  WorkPtr send(Tensors& tensors, int dst, int tag) override {
    Call call = mover(tensors);
    Tensors given = call.each(tensors, kRead);
    return call.work(gloo_->send(given, dst, tag));
  }

  WorkPtr recv(Tensors& tensors, int src, int tag) override {
    Call call = mover(tensors);
    Tensors given = call.each(tensors, kWritten);
    return call.work(gloo_->recv(given, src, tag));
  }

  WorkPtr recvAnysource(Tensors& tensors, int tag) override {
    Call call = mover(tensors);
    Tensors given = call.each(tensors, kWritten);
    return call.work(gloo_->recvAnysource(given, tag));
  }

  // -- synchronisation and lifecycle: gloo's ---------------------------------------------------

  WorkPtr barrier(const c10d::BarrierOptions& opts) override { return gloo_->barrier(opts); }
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override {
    gloo_->monitoredBarrier(opts, wait_all_ranks);
  }
  void setTimeout(std::chrono::milliseconds timeout) override { gloo_->setTimeout(timeout); }
  void setSequenceNumberForGroup() override { gloo_->setSequenceNumberForGroup(); }
  uint64_t getSequenceNumberForGroup() override { return gloo_->getSequenceNumberForGroup(); }
  void shutdown() override { gloo_->shutdown(); }
  void abort() override { gloo_->abort(); }

 private:
  template <class Opts>
  using InPlace = WorkPtr (c10d::Backend::*)(Tensors&, const Opts&);
  template <class Out, class In, class Opts>
  using OutOfPlace = WorkPtr (c10d::Backend::*)(Out&, In&, const Opts&);

  // A reduction gloo runs in place on `tensors` (as SUM where AVG was asked for); `averaged`:
  // whether this rank receives the result (and so divides it).
  template <class Opts>
  WorkPtr reducing_in_place(InPlace<Opts> collective, Tensors& tensors, const Opts& opts, bool averaged) {
    Call call = reducer(opts.reduceOp, tensors);
    Tensors given = call.each(tensors, kBoth);
    return call.work(((*gloo_).*collective)(given, summing(opts)),
                     averaged ? average(opts.reduceOp, tensors) : nullptr);
  }

  // A reduction of `inputs` into `outputs`.
  template <class Out, class In, class Opts>
  WorkPtr reducing(OutOfPlace<Out, In, Opts> collective, Out& outputs, In& inputs, const Opts& opts) {
    Call call = reducer(opts.reduceOp, outputs, inputs);
    Out out = call.each(outputs, kWritten);
    In in = call.each(inputs, kRead);
    return call.work(((*gloo_).*collective)(out, in, summing(opts)), average(opts.reduceOp, flat(outputs)));
  }

  // A collective that only moves data from `inputs` into `outputs`.
  template <class Out, class In, class Opts>
  WorkPtr moving(OutOfPlace<Out, In, Opts> collective, Out& outputs, In& inputs, const Opts& opts) {
    Call call = mover(outputs, inputs);
    Out out = call.each(outputs, kWritten);
    In in = call.each(inputs, kRead);
    return call.work(((*gloo_).*collective)(out, in, opts));
  }

  // What turns gloo's SUM into the AVG that was asked for, run once the SUM has landed.
  std::function<void()> average(const c10d::ReduceOp& op, const Tensors& tensors) const {
    if (op != c10d::ReduceOp::AVG) {
      return nullptr;
    }
    return [tensors, size = getSize()] {
      at::NoGradGuard no_grad;
      for (const at::Tensor& t : tensors) {
        // Complex as its real pairs: the same division, on a float kernel.
        (t.is_complex() ? at::view_as_real(t) : t).div_(size);
      }
    };
  }

  c10::intrusive_ptr<c10d::Backend> gloo_;
};

}  // namespace foo

// foo_rs._C._distributed, built when python/foo_rs/distributed first asks for it (after
// torch.distributed is imported: the Backend base class must be registered with pybind11).
// A new reference, or nullptr with the Python error set.
extern "C" PyObject* foo_glue_distributed_module() {
  namespace py = pybind11;
  try {
    auto m = py::reinterpret_steal<py::module_>(PyModule_New("foo_rs._C._distributed"));
    if (!m) {
      return nullptr;
    }
    m.doc() = "foo's c10d backend (src/glue/distributed.cpp)";
    py::class_<foo::ProcessGroupFooGloo, c10d::Backend, c10::intrusive_ptr<foo::ProcessGroupFooGloo>>(
        m, "ProcessGroupFooGloo",
        "c10d backend for foo tensors: gloo's collectives on CPU aliases of foo memory (no copy).")
        .def(py::init([](const c10::intrusive_ptr<c10d::Backend>& gloo) {
               return c10::make_intrusive<foo::ProcessGroupFooGloo>(gloo);
             }),
             py::arg("gloo"))
        .def_property_readonly("gloo", &foo::ProcessGroupFooGloo::gloo,
                               "The ProcessGroupGloo this backend runs its collectives on.");
    m.attr("BACKEND") = foo::kBackendName;
    m.attr("GLOO_DTYPES") = py::tuple(py::cast(foo::kGlooDtypes));
    std::vector<at::ScalarType> reducible = foo::kGlooDtypes;
    reducible.insert(reducible.end(), foo::kGlooComplex.begin(), foo::kGlooComplex.end());
    m.attr("GLOO_REDUCIBLE") = py::tuple(py::cast(reducible));
    return m.release().ptr();
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return nullptr;
}
