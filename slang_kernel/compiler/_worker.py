"""The compiler worker: one process that owns the Slang global session.

Started by client.CompilerProcess as `python -m slang_kernel.compiler._worker SOCKET_FD PARENT_PID`;
requests and replies are slang_kernel._ipc frames (CompilerRequest, CompilerReply) on that socket.
Whatever the compiler prints goes to stderr (fd 1 is pointed there). If Slang crashes, this process
dies and the client starts a new one; nothing here is the only copy of anything.

What it keeps between requests: the serialized IR blobs of cells, by digest, until the client
says they were replaced ("forget"), including those a "check_batch" made (listed in its reply). Modules are loaded into each request's own linkage and go with
it; the references that the C API hands out for the linkage and the module are released here
(unreleased, each request kept its whole linkage alive: ~0.3 MB per check, ~0.8 MB per compile).
"""

from __future__ import annotations

import ctypes
import os
import re
import time
from ctypes import POINTER, byref, c_char_p, c_int, c_void_p
from typing import Any, Iterable, cast

from .. import _ipc
from ._lib import blob_bytes, com_call, load
from ._walk import module_decls, program_reflection

TARGETS = {
    "glsl": 2, "hlsl": 5, "spirv": 6, "spirv-asm": 7, "cpp": 13, "cuda": 17, "metal": 24, "wgsl": 28,
    "torch-binding": 23,   # SLANG_CPP_PYTORCH_BINDING: host C++ of [TorchEntryPoint] functions
}
BASE_ARGS = ("-enable-machine-readable-diagnostics", "-matrix-layout-row-major")
# vtable slots in the 2026.12 header (IModule, and IEntryPoint::getFunctionReflection)
_ENTRY_POINT_COUNT, _ENTRY_POINT, _SERIALIZE, _GET_MODULE_REFLECTION, _DISASSEMBLE = 18, 19, 20, 28, 29
_EP_FUNCTION_REFLECTION = 17
_RELEASE = 2  # IUnknown::release
LANG_SLANG, STAGE_COMPUTE = 1, 6
CHECK_PHASES = ("load", "check", "serialize", "reflect", "refs")   # a check's steps, timed (wall_ms, cpu_ms)
COMPILE_PHASES = ("load", "check+link+emit", "reflect")            # a kernel compile's steps (wall_ms)


_IMPORT = re.compile(r'\[import\("_S[A-Z]*(\d+)')


def referenced_modules(ir: str) -> list[str]:
    """The modules whose declarations a checked module's IR imports (mangled names start with
    `_S`, a kind letter or none, then the module name, length-prefixed): what the compiler itself
    resolved the cell's references to, members, locals and parameters never included."""
    out = set()
    for m in _IMPORT.finditer(ir):
        n, at = int(m.group(1)), m.end()
        out.add(ir[at:at + n])
    return sorted(out)


def _release(obj: int | None) -> None:
    if obj:
        com_call(obj, _RELEASE, ctypes.c_uint32)


class Worker:
    def __init__(self) -> None:
        self.L = load()
        self.g = self.L.spCreateSession(None)
        self.blobs: dict[str, bytes] = {}
        self.retired: list[int] = []   # compile requests to destroy once the reply is on its way

    def retire(self) -> None:
        """Destroy the requests a batch left (main calls it after sending the reply)."""
        while self.retired:
            self.L.spDestroyCompileRequest(self.retired.pop())

    # -- helpers -------------------------------------------------------------------------------

    def _new_request(self, msg: _ipc.CompilerRequest, extra: tuple[str, ...] = ()) -> int:
        L = self.L
        self.blobs.update(msg.get("blobs", {}))
        req = L.spCreateCompileRequest(self.g)
        args = [*BASE_ARGS, *msg.get("options", ()), *extra]
        for k, v in msg.get("defines", {}).items():
            args += ["-D", f"{k}={v}" if v is not None else k]
        arr = (c_char_p * len(args))(*[a.encode() for a in args])
        L.spProcessCommandLineArguments(req, arr, len(args))
        sess = c_void_p()  # the request's linkage, handed out with a reference of ours
        L.spCompileRequest_getSession(req, byref(sess))
        try:
            for module, path, digest in msg.get("deps", ()):
                data = self.blobs[digest]
                diag = c_void_p()
                # returns a borrowed module (the linkage owns it): not released here
                mod = L.slang_loadModuleFromIRBlob(sess, module.encode(), path.encode(), data, len(data),
                                                   byref(diag))
                text = blob_bytes(diag.value) if diag.value else b""
                if not mod:
                    L.spDestroyCompileRequest(req)
                    raise RuntimeError(f"could not load {path} into the compiler: {text.decode(errors='replace')}")
        finally:
            _release(sess.value)
        return int(req)

    def forget(self, digests: Iterable[str]) -> None:
        """Drop the blobs of replaced revisions (any request may carry a "forget" list)."""
        for digest in digests:
            self.blobs.pop(digest, None)

    def _add_source(self, req: int, msg: _ipc.CompilerRequest) -> int:
        tu = self.L.spAddTranslationUnit(req, LANG_SLANG, msg["module"].encode())
        self.L.spAddTranslationUnitSourceString(req, tu, msg["path"].encode(), msg["source"].encode())
        return int(tu)

    def _diag(self, req: int) -> str:
        return (self.L.spGetDiagnosticOutput(req) or b"").decode("utf-8", "replace")

    def _module(self, req: int, tu: int) -> int:
        """The translation unit's module, borrowed from the request (valid until it is destroyed)."""
        mod = c_void_p()
        self.L.spCompileRequest_getModule(req, tu, byref(mod))
        _release(mod.value)  # the API adds a reference for us; the request keeps its own
        return mod.value or 0

    # -- operations ----------------------------------------------------------------------------

    def op_ping(self, msg: _ipc.CompilerRequest) -> dict[str, Any]:
        return {"pid": os.getpid(), "build": self.L.spGetBuildTagString().decode(), "blobs": len(self.blobs),
                "blob_bytes": sum(len(b) for b in self.blobs.values())}

    def op_check(self, msg: _ipc.CompilerRequest) -> dict[str, Any]:
        """Front end only: diagnostics, serialized IR, and what the cell declares."""
        L = self.L
        t, w = [time.process_time()], [time.perf_counter()]
        req = self._new_request(msg, ("-no-codegen",))
        out: dict[str, Any] = {}
        try:
            tu = self._add_source(req, msg)
            t.append(time.process_time())
            w.append(time.perf_counter())
            rc = L.spCompile(req)
            t.append(time.process_time())
            w.append(time.perf_counter())
            out = {"ok": rc >= 0, "diagnostics": self._diag(req)}
            if rc < 0:
                out["wall_ms"] = {k: (b - a) * 1000 for k, a, b in zip(CHECK_PHASES, w, w[1:])}
                return out
            mod = self._module(req, tu)
            blob = c_void_p()
            com_call(mod, _SERIALIZE, c_int, (POINTER(c_void_p), byref(blob)))
            out["blob"] = blob_bytes(blob.value)
            t.append(time.process_time())
            w.append(time.perf_counter())
            decl = cast("int | None", com_call(mod, _GET_MODULE_REFLECTION, c_void_p))
            out["decls"] = module_decls(L, decl) if decl else []
            out["entry_points"] = self._entry_points(mod)
            t.append(time.process_time())
            w.append(time.perf_counter())
            ir = self._disassemble(mod) if msg.get("deps") or msg.get("ir") else ""
            out["refs"] = referenced_modules(ir)   # (a module that loads no cell references none)
            t.append(time.process_time())
            w.append(time.perf_counter())
            out["cpu_ms"] = {k: (b - a) * 1000 for k, a, b in zip(CHECK_PHASES, t, t[1:])}
            out["wall_ms"] = {k: (b - a) * 1000 for k, a, b in zip(CHECK_PHASES, w, w[1:])}
            if msg.get("ir"):
                out["ir"] = ir
            return out
        finally:
            t_end = time.perf_counter()
            if msg.get("retire_later"):   # a batch item: destroyed after the reply is sent (retire)
                self.retired.append(req)
            else:
                L.spDestroyCompileRequest(req)
            if "wall_ms" in out:
                out["wall_ms"]["teardown"] = (time.perf_counter() - t_end) * 1000

    def op_check_batch(self, msg: _ipc.CompilerRequest) -> dict[str, Any]:
        """Several checks in one round trip, in order (a signature edit's dependents): each item's
        blob is kept under its `digest`, so a later item may import an earlier one's new revision.
        One reply per item, as op_check gives; `kept` lists the blobs this worker now holds. The
        items' compile requests are destroyed after the reply is sent (~0.2 ms each, off the edit's path)."""
        self.blobs.update(msg.get("blobs", {}))   # the imports the items share, sent once
        replies, kept = [], []
        for item in msg.get("items", ()):
            try:
                reply = self.op_check(cast(_ipc.CompilerRequest, dict(item, retire_later=True)))
            except Exception as exc:   # e.g. it imports an earlier item that failed: the client checks it alone
                replies.append({"ok": False, "skipped": f"{type(exc).__name__}: {exc}", "diagnostics": ""})
                continue
            if reply["ok"]:
                self.blobs[item["digest"]] = reply["blob"]
                kept.append(item["digest"])
            replies.append(reply)
        return {"replies": replies, "kept": kept}

    def _entry_points(self, mod: int) -> list[str]:
        names = []
        for i in range(cast(int, com_call(mod, _ENTRY_POINT_COUNT, ctypes.c_int32))):
            ep = c_void_p()
            com_call(mod, _ENTRY_POINT, c_int, (ctypes.c_int32, i), (POINTER(c_void_p), byref(ep)))
            fn = com_call(ep.value, _EP_FUNCTION_REFLECTION, c_void_p) if ep.value else None
            if fn:
                names.append(self.L.spReflectionFunction_GetName(fn).decode())
            if ep.value:
                com_call(ep.value, 2, ctypes.c_uint32)
        return names

    def _disassemble(self, mod: int) -> str:
        blob = c_void_p()
        com_call(mod, _DISASSEMBLE, c_int, (POINTER(c_void_p), byref(blob)))
        return blob_bytes(blob.value).decode("utf-8", "replace")

    def op_disassemble(self, msg: _ipc.CompilerRequest) -> dict[str, Any]:
        L = self.L
        req = self._new_request(msg, ("-no-codegen",))
        try:
            tu = self._add_source(req, msg)
            rc = L.spCompile(req)
            if rc < 0:
                return {"ok": False, "diagnostics": self._diag(req)}
            return {"ok": True, "ir": self._disassemble(self._module(req, tu)), "diagnostics": self._diag(req)}
        finally:
            L.spDestroyCompileRequest(req)

    def op_compile(self, msg: _ipc.CompilerRequest) -> dict[str, Any]:
        """Generate target code for entry points (a fresh request each time) and reflect it."""
        L = self.L
        target = msg["target"]
        w = [time.perf_counter()]
        req = self._new_request(msg)
        try:
            tu = self._add_source(req, msg)
            w.append(time.perf_counter())
            ti = L.spAddCodeGenTarget(req, TARGETS[target])
            if not msg["entry_points"]:
                L.spSetTargetFlags(req, ti, 1 << 8)  # whole program: emit every kernel of the module
            if msg.get("profile"):
                L.spSetTargetProfile(req, ti, L.spFindProfile(self.g, msg["profile"].encode()))
            eps = [L.spAddEntryPoint(req, tu, name.encode(), STAGE_COMPUTE) for name in msg["entry_points"]]
            t0 = time.perf_counter()
            rc = L.spCompile(req)
            out: dict[str, Any] = {"ok": rc >= 0, "diagnostics": self._diag(req)}
            if rc < 0:
                return out
            code: dict[str, str] = {}
            if not eps:  # the whole module (e.g. [CUDAKernel] functions, which are not entry points)
                blob = c_void_p()
                if L.spGetTargetCodeBlob(req, ti, byref(blob)) >= 0:
                    code[""] = blob_bytes(blob.value).decode("utf-8", "replace")
            for name, ep in zip(msg["entry_points"], eps):
                blob = c_void_p()
                if L.spGetEntryPointCodeBlob(req, ep, ti, byref(blob)) < 0:
                    return {"ok": False, "diagnostics": out["diagnostics"] + self._diag(req)
                            + f"\nE00000\terror\t\t0\t0\t0\t0\tno {target} code for entry point {name}\n"}
                code[name] = blob_bytes(blob.value).decode("utf-8", "replace")
            out["code"] = code
            out["compile_ms"] = (time.perf_counter() - t0) * 1000
            w.append(time.perf_counter())
            if msg.get("reflect", True):
                out["reflection"] = program_reflection(L, req, target)
            w.append(time.perf_counter())
            # spCompile parses, checks, links and emits in one call: the C API does not split them
            out["wall_ms"] = {k: (b - a) * 1000 for k, a, b in zip(COMPILE_PHASES, w, w[1:])}
            return out
        finally:
            L.spDestroyCompileRequest(req)

    def op_forget(self, msg: _ipc.CompilerRequest) -> dict[str, Any]:
        self.forget(msg.get("digests", ()))
        return {}

    def op_abort(self, msg: _ipc.CompilerRequest) -> dict[str, Any]:  # for tests of crash recovery
        os.abort()


def main() -> None:
    channel = _ipc.connect_to_parent()
    if channel is None:
        return
    os.dup2(2, 1)  # what the compiler prints goes to stderr
    try:
        worker: Worker | None = Worker()
        startup_error = None
    except Exception as exc:  # reported on the first request, then the worker exits
        worker, startup_error = None, exc
    while True:
        try:
            msg = cast(_ipc.CompilerRequest, channel.recv())
        except EOFError:  # the client closed its end (or died)
            return
        reply: _ipc.CompilerReply
        if worker is None:
            channel.send({"error": f"{type(startup_error).__name__}: {startup_error}", "fatal": True})
            return
        try:
            worker.forget(msg.get("forget", ()))
            reply = {"result": getattr(worker, "op_" + msg["op"])(msg)}
        except Exception as exc:  # a Python-level failure is an answer, not a crash
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        channel.send(reply)
        worker.retire()


if __name__ == "__main__":
    main()
