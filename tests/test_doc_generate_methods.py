"""Every statement of PyTorch's documentation of
torch.utils.generate_methods_for_privateuse1_backend (../shared/seeds/003), for foo."""

from __future__ import annotations

import os
import subprocess
import sys

import foo_rs
import pytest
import torch


def test_doc_example():
    # >>> a = torch.tensor(2).foo() ; a.is_foo ; hasattr(torch.nn.Module, 'foo')
    a = torch.tensor(2).foo()
    assert a.is_foo is True
    assert a.device.type == "foo" and a.cpu().item() == 2
    assert hasattr(torch.nn.Module, "foo")
    assert torch.tensor(2).is_foo is False


def test_tensor_methods():
    t = torch.arange(4.0)
    on1 = t.foo(1)
    assert on1.device == torch.device("foo:1")
    assert on1.foo(1) is on1  # already there: no copy
    on0 = on1.foo()  # default: the current device
    assert on0.device == torch.device("foo:0")
    assert torch.equal(on0.cpu(), t)


def test_module_methods():
    m = torch.nn.Linear(3, 2)
    m.foo()
    assert all(p.is_foo and p.device.index == 0 for p in m.parameters())
    m.foo(1)
    assert all(p.device == torch.device("foo:1") for p in m.parameters())


def test_untyped_storage_methods():
    s = torch.arange(6, dtype=torch.int32).untyped_storage()
    fs = s.foo()
    assert fs.is_foo and not s.is_foo
    assert fs.device.type == "foo" and fs.nbytes() == s.nbytes()
    assert bytes(fs.cpu()) == bytes(s)
    assert fs.foo() is fs


def test_typed_storage_methods():
    # torch warns about TypedStorage once per process: re-arm it so that this test does not
    # depend on running first.
    torch.storage._reset_warn_typed_storage_removal()
    with pytest.warns(UserWarning, match="TypedStorage is deprecated"):
        ts = torch.arange(3.0).storage()
        fts = ts.foo()
        assert fts.is_foo
        assert fts.dtype == torch.float32
        assert fts.cpu().tolist() == [0.0, 1.0, 2.0]


def _all_dtypes() -> list[torch.dtype]:
    return sorted({d for d in vars(torch).values() if isinstance(d, torch.dtype)}, key=str)


def test_unsupported_dtypes_are_every_dtype_the_device_cannot_hold():
    # foo_rs.UNSUPPORTED_DTYPES is every torch dtype outside the kernels' allowlist, so a dtype
    # torch adds (bcomplex32, say) is refused instead of slipping through.
    unsupported, supported = set(foo_rs.UNSUPPORTED_DTYPES), set(foo_rs.SUPPORTED_DTYPES)
    assert unsupported | supported == set(_all_dtypes()) and not unsupported & supported
    assert len(foo_rs.UNSUPPORTED_DTYPES) == len(unsupported)  # no duplicates
    assert torch.bcomplex32 in unsupported and torch.complex32 in unsupported and torch.bits8 in unsupported
    for d in [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.bool, torch.complex64]:
        assert d in supported


@pytest.mark.filterwarnings("ignore:TypedStorage is deprecated")
@pytest.mark.parametrize("dtype", _all_dtypes(), ids=str)
def test_typed_storage_foo_for_every_dtype(dtype):
    # "unsupported_dtype ... indicating that the storage does not support the torch.dtype type."
    # Listed dtypes are refused by Storage.foo(); every other dtype gives a foo storage that
    # round-trips byte for byte, and a tensor viewing it copies back.
    try:
        cpu = torch.storage.TypedStorage(wrap_storage=torch.UntypedStorage(8), dtype=dtype, _internal=True)
    except (RuntimeError, TypeError):
        pytest.skip(f"{dtype} cannot back a CPU TypedStorage")
    assert cpu.is_foo is False
    if dtype in foo_rs.UNSUPPORTED_DTYPES:
        with pytest.raises(RuntimeError, match=f"Cannot create foo storage as {dtype} dtype is not supported"):
            cpu.foo()
        return
    n = 5
    raw = torch.arange(n * dtype.itemsize, dtype=torch.uint8)
    if dtype == torch.bool:
        raw = raw % 2  # a bool byte is 0 or 1
    cpu = torch.storage.TypedStorage(wrap_storage=raw.clone().untyped_storage(), dtype=dtype, _internal=True)
    on_foo = cpu.foo(1)
    assert on_foo.is_foo and on_foo.device == torch.device("foo:1")
    assert on_foo.dtype == dtype and on_foo.size() == n
    assert bytes(on_foo.cpu()._untyped_storage) == bytes(raw.numpy())
    t = torch.empty(0, dtype=dtype, device="foo:1").set_(on_foo._untyped_storage, 0, (n,), (1,))
    assert bytes(t.cpu().untyped_storage()) == bytes(raw.numpy())


@pytest.mark.filterwarnings("ignore::UserWarning")  # torch warns that these dtypes are experimental
def test_unsupported_dtypes_are_refused_by_the_device_too():
    # The list is no wider than the device: every listed dtype a CPU tensor can hold fails to
    # move to foo (a dtype the kernels learn must leave the list, foo_rs.SUPPORTED_DTYPES).
    for dtype in foo_rs.UNSUPPORTED_DTYPES:
        try:
            cpu = torch.empty(2, dtype=dtype)
        except (RuntimeError, TypeError):
            continue
        with pytest.raises(RuntimeError):
            cpu.to("foo")


def test_generation_is_once_only():
    with pytest.raises(RuntimeError):
        torch.utils.generate_methods_for_privateuse1_backend()


def _run_fresh(code: str, **env: str) -> str:
    """Runs ``code`` in a new interpreter with torch's backend autoload off (so nothing names the
    PrivateUse1 backend before ``code`` does); returns its stdout, failing on a non-zero exit."""
    full_env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0", **env)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full_env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


_CHECK_STORAGE_AFTER_IMPORT = """
import warnings
import foo_rs
assert hasattr(torch.UntypedStorage, "foo") and hasattr(torch.TypedStorage, "foo")
assert hasattr(torch.UntypedStorage, "is_foo") and hasattr(torch.TypedStorage, "is_foo")
# the seed's example, now that the kernels are loaded
a = torch.tensor(2).foo()
assert a.is_foo and hasattr(torch.nn.Module, "foo")
s = torch.arange(4, dtype=torch.int32).untyped_storage()
assert bytes(s.foo().cpu()) == bytes(s)
warnings.simplefilter("ignore")  # TypedStorage is deprecated
assert torch.storage.TypedStorage(3, dtype=torch.float32, _internal=True).foo().is_foo
refused = 0
for dtype in foo_rs.UNSUPPORTED_DTYPES:
    ts = torch.storage.TypedStorage(wrap_storage=torch.UntypedStorage(8), dtype=dtype, _internal=True)
    try:
        ts.foo()
    except RuntimeError as e:
        assert "not supported by this backend" in str(e), e
        refused += 1
print(refused == len(foo_rs.UNSUPPORTED_DTYPES) > 0)
"""


@pytest.mark.parametrize(
    ("generate", "generated"),
    [
        # The seed's example order: rename, generate, then the kernels arrive with `import foo_rs`.
        # "In the default scenario, storage-related methods will not be generated automatically";
        # foo_rs must still add Storage.foo() (with its unsupported-dtype list) on import.
        ("torch.utils.generate_methods_for_privateuse1_backend()", ["True", "True", "False"]),
        # Storage methods generated by the user without a list: foo_rs still refuses its dtypes.
        ("torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)", ["True", "True", "True"]),
    ],
    ids=["default", "for_storage"],
)
def test_methods_generated_before_import_foo_rs(generate, generated):
    code = (
        "import torch\n"
        "torch.utils.rename_privateuse1_backend('foo')\n"
        f"{generate}\n"
        "print(hasattr(torch.Tensor, 'foo'), hasattr(torch.nn.Module, 'foo'), hasattr(torch.UntypedStorage, 'foo'))\n"
        + _CHECK_STORAGE_AFTER_IMPORT
    )
    assert _run_fresh(code).split() == generated + ["True"]


def test_generate_flags_and_unsupported_dtype():
    # for_tensor / for_module / for_storage each generate only their own methods, and
    # "unsupported_dtype ... takes effect only when the storage method needs to be generated".
    # torch's behaviour for any backend name; shown on "bar", without foo_rs.
    code = """
import warnings
import torch
warnings.simplefilter("ignore")  # TypedStorage is deprecated
torch.utils.rename_privateuse1_backend("bar")
gen = torch.utils.generate_methods_for_privateuse1_backend
def has():
    return [hasattr(torch.Tensor, "bar"), hasattr(torch.Tensor, "is_bar"), hasattr(torch.nn.Module, "bar"),
            hasattr(torch.UntypedStorage, "bar"), hasattr(torch.TypedStorage, "bar")]
gen(for_tensor=False, for_module=False, for_packed_sequence=False, for_storage=False,
    unsupported_dtype=[torch.float16])
print(has())
try:
    gen(for_tensor=False, for_module=True, for_packed_sequence=False)  # Module.bar needs Tensor.bar
except RuntimeError as e:
    print("for_tensor=True" in str(e))
print(has())
gen(for_module=False, for_packed_sequence=False)
print(has())
gen(for_tensor=False, for_packed_sequence=False, for_storage=True, unsupported_dtype=[torch.float16])
print(has())
try:
    torch.storage.TypedStorage(2, dtype=torch.float16, _internal=True).bar()
except RuntimeError as e:
    print("Cannot create bar storage as torch.float16 dtype is not supported by this backend" in str(e))
try:  # not listed: passes the dtype check (and fails later only because "bar" has no kernels)
    torch.storage.TypedStorage(2, dtype=torch.float32, _internal=True).bar()
    print(True)
except Exception as e:
    print("not supported by this backend" not in str(e))
print(torch.storage.TypedStorage(2, dtype=torch.float32, _internal=True).is_bar)
"""
    nothing, tensor_only, everything = (
        "[False, False, False, False, False]",
        "[True, True, False, False, False]",
        "[True, True, True, True, True]",
    )
    lines = _run_fresh(code).splitlines()
    assert lines == [nothing, "True", nothing, tensor_only, everything, "True", "True", "False"], lines


# ---- Tensor / Module / Storage methods in detail -----------------------------------------------


def test_tensor_foo_device_forms():
    t = torch.arange(3.0)
    for device in ("foo:1", torch.device("foo", 1), 1):
        on1 = t.foo(device)
        assert on1.device == torch.device("foo:1") and torch.equal(on1.cpu(), t)
    assert t.foo("foo").device == torch.device("foo:0")  # no index: the current device
    torch.foo.set_device(1)
    assert t.foo().device == torch.device("foo:1")
    pinned = t.pin_memory()
    assert torch.equal(pinned.foo(non_blocking=True).cpu(), t)
    assert torch.equal(t.foo(0, non_blocking=True).cpu(), t)
    with pytest.raises(RuntimeError, match="Invalid device, must be foo device"):
        t.foo("cpu")
    with pytest.raises(RuntimeError, match="Invalid device, must be foo device"):
        t.foo(torch.device("cpu"))


def test_module_foo_returns_self_and_moves_buffers():
    bn = torch.nn.BatchNorm1d(3)
    bn(torch.randn(4, 3))  # running stats now differ from their initial values
    mean, var = bn.running_mean.clone(), bn.running_var.clone()
    assert bn.foo() is bn
    assert all(b.device == torch.device("foo:0") for b in bn.buffers())
    assert bn.num_batches_tracked.device.type == "foo"
    assert torch.equal(bn.running_mean.cpu(), mean) and torch.equal(bn.running_var.cpu(), var)
    assert bn.foo(1) is bn and bn.running_var.device == torch.device("foo:1")
    assert bn.weight.device == torch.device("foo:1")


def test_untyped_storage_foo_device_and_cross_device_copy():
    s = torch.arange(8, dtype=torch.int16).untyped_storage()
    on1 = s.foo(1)
    assert on1.device == torch.device("foo:1") and on1.is_foo
    on0 = s.foo()
    assert on0.device == torch.device("foo:0")
    moved = on0.foo(1)  # foo:0 -> foo:1 is a copy onto the other device
    assert moved is not on0 and moved.device == torch.device("foo:1")
    assert bytes(moved.cpu()) == bytes(s) == bytes(on0.cpu())
    assert moved.foo(1) is moved and moved.foo("foo:1") is moved


@pytest.mark.filterwarnings("ignore:TypedStorage is deprecated")
def test_cpu_typed_storage_is_not_foo():
    assert torch.arange(3.0).storage().is_foo is False
    assert torch.arange(3.0).untyped_storage().is_foo is False


# ---- sparse ("if you need to support sparse data storage, you need to extend the implementation
# yourself"): foo_rs does not; every way onto foo gives one clear error ----------------------------


def _sparse_inputs() -> dict[str, torch.Tensor]:
    dense = torch.tensor([[0.0, 1.0], [2.0, 0.0]])
    return {
        "coo": dense.to_sparse(),
        "csr": dense.to_sparse_csr(),
        "csc": dense.to_sparse_csc(),
        "bsr": dense.to_sparse_bsr((1, 1)),
        "bsc": dense.to_sparse_bsc((1, 1)),
    }


@pytest.mark.filterwarnings("ignore:Sparse")  # torch: "Sparse CSR tensor support is in beta state"
@pytest.mark.parametrize("kind", ["coo", "csr", "csc", "bsr", "bsc"])
def test_sparse_tensors_are_refused_clearly(kind):
    t = _sparse_inputs()[kind]
    expected = rf"foo_rs does not support sparse tensors \(layout {t.layout}.*\.to_dense\(\)"
    moves = [lambda: t.foo(), lambda: t.foo(1), lambda: t.to("foo"), lambda: t.to(device="foo:1", dtype=torch.float64)]
    for move in moves:
        with pytest.raises(NotImplementedError, match=expected):
            move()
    with pytest.raises(RuntimeError, match="foo_rs does not support sparse tensors"):
        torch.zeros(2, 2, device="foo").copy_(t)
    # The suggested way works, and sparse CPU tensors are untouched.
    assert torch.equal(t.to_dense().foo().cpu(), t.to_dense())
    assert torch.equal(t.to(torch.float64).to_dense(), t.to_dense().double())


@pytest.mark.filterwarnings("ignore:Sparse")
def test_sparse_tensors_cannot_be_made_on_foo():
    dense_foo = torch.tensor([[0.0, 1.0], [2.0, 0.0]], device="foo")
    csr = _sparse_inputs()["csr"]
    makers = [
        lambda: torch.sparse_coo_tensor(torch.tensor([[0], [1]]).foo(), torch.tensor([1.0]).foo(), (2, 2)),
        lambda: torch.sparse_csr_tensor(csr.crow_indices(), csr.col_indices(), csr.values(), (2, 2), device="foo"),
        lambda: torch.empty(2, 2, layout=torch.sparse_coo, device="foo"),
        lambda: torch.zeros(2, 2, layout=torch.sparse_csr, device="foo"),
    ]
    for make in makers:
        with pytest.raises(NotImplementedError, match="foo_rs does not support sparse tensors"):
            make()
    with pytest.raises(RuntimeError, match="foo_rs does not support sparse tensors"):
        torch.nn.Embedding(3, 2, sparse=True).foo()(torch.tensor([1], device="foo")).sum().backward()
    assert dense_foo.sum().item() == 3.0  # dense foo is unaffected
