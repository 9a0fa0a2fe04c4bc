// mixed_attn._fastplan: MixedAttention.plan()'s per-step call of torch.ops.mixed_attn.plan_upload
// without the Python side of torch's op call (argument parsing against the schema, boxing into
// IValues, the torch-function checks, the int[] -> list conversion): that layer costs more host
// time than the planning itself. The op is still called through the C++ dispatcher, so the same
// kernel (CPU, CUDA or HIP plan_upload) runs and dispatch modes still see it.
//
// A separate Python extension module (the op library _C.so uses no Python C API), written against
// the limited API (abi3), linked only to libtorch: it finds the op by name at run time.
//
//   _fastplan.plan_upload(qo_indptr, kv_indptr, seq_lens, meta_host, meta_device, config, max_rows)
//
// returns plan_info as a list, or None when it does not handle the call: an argument that is not
// a plain torch.Tensor, lengths that are not contiguous 1-D int32 host tensors, a torch function
// mode active, more than max_rows rows (the wrapper grows its buffers first), or any error (the caller then makes the regular op call, which raises the
// error exactly as before). It writes nothing when it returns None.
#define Py_LIMITED_API 0x030A0000
#include <Python.h>

#include <ATen/PythonTorchFunctionTLS.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <exception>
#include <vector>

namespace {

PyObject* g_tensor_type = nullptr;  // torch.Tensor, set by init()
PyObject* g_cdata = nullptr;  // "_cdata": a tensor's TensorImpl address (torch/_tensor.py)

using PlanUploadFn = std::vector<int64_t>(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                          const at::Tensor&, const at::Tensor&);

// The tensor behind a plain torch.Tensor, borrowed (+0: the caller's Python objects keep it alive
// for the call; taking a reference would go through the Python object, under the GIL), or
// undefined.
struct Borrowed {
  at::Tensor t;
  Borrowed() = default;
  Borrowed(const Borrowed&) = delete;
  Borrowed& operator=(const Borrowed&) = delete;
  ~Borrowed() {
    if (t.defined()) t.unsafeReleaseTensorImpl();  // +0: nothing to drop
  }
};

bool unpack(PyObject* obj, Borrowed* out) {
  if (reinterpret_cast<PyObject*>(Py_TYPE(obj)) != g_tensor_type) return false;
  PyObject* addr = PyObject_GetAttr(obj, g_cdata);
  if (addr == nullptr) {
    PyErr_Clear();
    return false;
  }
  void* impl = PyLong_AsVoidPtr(addr);
  Py_DECREF(addr);
  if (impl == nullptr) {
    PyErr_Clear();
    return false;
  }
  out->t = at::Tensor(
      c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>::reclaim(static_cast<c10::TensorImpl*>(impl)));
  return true;
}

PyObject* init(PyObject*, PyObject* tensor_type) {
  Py_XDECREF(g_tensor_type);
  Py_INCREF(tensor_type);
  g_tensor_type = tensor_type;
  Py_RETURN_NONE;
}

PyObject* plan_upload(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 7) {
    PyErr_SetString(PyExc_TypeError, "_fastplan.plan_upload takes 7 arguments");
    return nullptr;
  }
  if (g_tensor_type == nullptr || at::impl::torch_function_mode_enabled()) Py_RETURN_NONE;
  const long long max_rows = PyLong_AsLongLong(args[6]);
  if (max_rows == -1 && PyErr_Occurred()) return nullptr;
  Borrowed b[6];
  for (int i = 0; i < 6; ++i)
    if (!unpack(args[i], &b[i])) Py_RETURN_NONE;
  const at::Tensor* t[6] = {&b[0].t, &b[1].t, &b[2].t, &b[3].t, &b[4].t, &b[5].t};
  // What the wrapper's _host_int32 would convert (or refuse) goes that way, without an exception.
  for (int i = 0; i < 3; ++i)
    if (!t[i]->is_cpu() || t[i]->scalar_type() != at::kInt || t[i]->dim() != 1 || !t[i]->is_contiguous())
      Py_RETURN_NONE;
  if (t[0]->numel() - 1 > max_rows) Py_RETURN_NONE;
  // No dispatch key forced on or off by a mode or a transform (the thread's defaults): the call
  // goes straight to the backend's kernel, the one torch's dispatch reaches through the autograd
  // fallback (which does nothing here: no int tensor requires grad) and the ADInplaceOrView
  // fallthrough, without boxing the arguments. Otherwise the full dispatch.
  const c10::impl::LocalDispatchKeySet tls = c10::impl::tls_local_dispatch_key_set();
  const bool direct = tls.included_ == c10::default_included_set && tls.excluded_ == c10::default_excluded_set;
  c10::DispatchKeySet ks;
  for (const at::Tensor* x : t) ks = ks | x->key_set();
  ks = ks & c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER, c10::DispatchKey::BackendSelect);

  std::vector<int64_t> info;
  bool ok = false;
  // As torch's own op call: the GIL is released while the op runs (on a GPU, plan_upload may
  // wait for the copy out of this host buffer two steps ago).
  PyThreadState* state = PyEval_SaveThread();
  try {
    static const auto op =
        c10::Dispatcher::singleton().findSchemaOrThrow("mixed_attn::plan_upload", "").typed<PlanUploadFn>();
    info = direct ? op.redispatch(ks, *t[0], *t[1], *t[2], *t[3], *t[4], *t[5])
                  : op.call(*t[0], *t[1], *t[2], *t[3], *t[4], *t[5]);
    ok = true;
  } catch (const std::exception&) {
    // the regular call raises it (a rejected plan writes and uploads nothing)
  }
  PyEval_RestoreThread(state);
  if (!ok) Py_RETURN_NONE;

  PyObject* list = PyList_New(Py_ssize_t(info.size()));
  if (list == nullptr) return nullptr;
  for (size_t i = 0; i < info.size(); ++i) {
    PyObject* v = PyLong_FromLongLong(info[i]);
    if (v == nullptr) {
      Py_DECREF(list);
      return nullptr;
    }
    PyList_SetItem(list, Py_ssize_t(i), v);  // steals v
  }
  return list;
}

PyMethodDef methods[] = {
    {"init", init, METH_O, "init(torch.Tensor): the tensor type plan_upload accepts"},
    {"plan_upload", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(plan_upload)), METH_FASTCALL,
     "plan_upload(qo_indptr, kv_indptr, seq_lens, meta_host, meta_device, config, max_rows): "
     "plan_info, or None (then make the regular torch.ops.mixed_attn.plan_upload call)"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_fastplan", nullptr, -1, methods, nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__fastplan(void) {
  g_cdata = PyUnicode_InternFromString("_cdata");
  if (g_cdata == nullptr) return nullptr;
  return PyModule_Create(&module_def);
}
