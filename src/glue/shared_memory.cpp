// foo storages in shared memory, so torch.multiprocessing can send foo tensors between
// processes the way it sends CPU tensors (python/foo_rs/_multiprocessing.py).
//
// foo memory is host memory, private to the process that allocated it. Sending a storage moves
// it, once, into a memfd-backed shared mapping (its bytes copied, the storage's data pointer
// swapped, as CPU's share_memory_() does); the receiver maps the same file. Both processes then
// see one buffer: a write on either side is visible to the other. A shared storage lives outside
// the caching allocator (memory_allocated() does not count it) and cannot be resized, as CUDA's
// IPC storages cannot.
#include <c10/core/StorageImpl.h>
#include <torch/library.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <tuple>

#include "common.h"

namespace foo {
namespace {

struct SharedRegion {
  void* addr;
  size_t size;
  int fd;  // owned: the receiver of a fd gets a dup of it
};

void delete_shared(void* ctx) {
  auto* r = static_cast<SharedRegion*>(ctx);
  if (r == nullptr) return;
  ::munmap(r->addr, r->size);
  ::close(r->fd);
  delete r;
}

// Maps `size` bytes of `fd` (which the region then owns) read-write and shared.
SharedRegion* map_region(int fd, size_t size) {
  void* addr = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (addr == MAP_FAILED) {
    const int err = errno;
    ::close(fd);
    TORCH_CHECK(false, "foo shared memory: cannot map ", size, " bytes: ", std::strerror(err));
  }
  return new SharedRegion{addr, size, fd};
}

SharedRegion* shared_region_of(const c10::DataPtr& p) {
  return p.get_deleter() == &delete_shared ? static_cast<SharedRegion*>(p.get_context()) : nullptr;
}

// Moves self's storage into shared memory (once) and returns (fd, nbytes). The fd stays owned
// by the storage: the caller duplicates it to send it.
std::tuple<int64_t, int64_t> share_memory(const at::Tensor& self) {
  TORCH_CHECK(self.device().is_privateuseone(), "foo_rs::_share_memory expects a foo tensor, got one on ",
              self.device());
  c10::StorageImpl* storage = self.storage().unsafeGetStorageImpl();
  const size_t nbytes = storage->nbytes();
  TORCH_CHECK_VALUE(nbytes > 0, "foo_rs::_share_memory: an empty storage has nothing to share");
  if (SharedRegion* r = shared_region_of(storage->data_ptr())) {
    return {r->fd, static_cast<int64_t>(nbytes)};
  }
  const int fd = ::memfd_create("foo_rs_shared", MFD_CLOEXEC);
  TORCH_CHECK(fd >= 0, "foo shared memory: memfd_create failed: ", std::strerror(errno));
  if (::ftruncate(fd, static_cast<off_t>(nbytes)) != 0) {
    const int err = errno;
    ::close(fd);
    TORCH_CHECK(false, "foo shared memory: cannot size the shared file to ", nbytes, " bytes: ", std::strerror(err));
  }
  SharedRegion* region = map_region(fd, nbytes);
  copy_bytes(region->addr, storage->data(), nbytes);
  storage->set_data_ptr_noswap(c10::DataPtr(region->addr, region, &delete_shared, self.device()));
  storage->set_resizable(false);
  return {fd, static_cast<int64_t>(nbytes)};
}

// A 1-D uint8 foo tensor over `nbytes` of the shared file `fd` (duplicated: the caller keeps
// and closes its own), on foo device `device`.
at::Tensor from_shared_fd(int64_t fd, int64_t nbytes, int64_t device) {
  TORCH_CHECK_VALUE(nbytes > 0, "foo_rs::_from_shared_fd: nbytes must be positive, got ", nbytes);
  TORCH_CHECK(device >= 0 && device < foo_device_count(), "foo_rs::_from_shared_fd: the sender's device foo:", device,
              " does not exist in this process (", foo_device_count(), " foo device(s); FOO_RS_DEVICE_COUNT)");
  const int own = ::fcntl(static_cast<int>(fd), F_DUPFD_CLOEXEC, 0);
  TORCH_CHECK(own >= 0, "foo_rs::_from_shared_fd: bad file descriptor ", fd, ": ", std::strerror(errno));
  SharedRegion* region = map_region(own, static_cast<size_t>(nbytes));
  const c10::Device dev(kFoo, static_cast<c10::DeviceIndex>(device));
  auto storage = c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), static_cast<size_t>(nbytes),
      c10::DataPtr(region->addr, region, &delete_shared, dev), c10::GetAllocator(kFoo), /*resizable=*/false);
  return at::empty({0}, at::TensorOptions().dtype(at::kByte).device(dev))
      .set_(c10::Storage(std::move(storage)), 0, {nbytes}, {1});
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(foo_rs, m) {
  m.def("_share_memory(Tensor(a!) self) -> (int, int)");
  m.def("_from_shared_fd(int fd, int nbytes, int device) -> Tensor", &from_shared_fd);
}

TORCH_LIBRARY_IMPL(foo_rs, PrivateUse1, m) { m.impl("_share_memory", share_memory); }

}  // namespace foo
