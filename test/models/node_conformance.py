#!/usr/bin/python3
"""Run the ONNX backend node tests through `loom-run --forward`.

  node_conformance.py --loom-run BIN --loomc BIN [--data-dir DIR] [--filter REGEX]
                      [--jobs 2] [--rtol 1e-4] [--atol 1e-5] [--timeout 60]
                      [--known-failures FILE] [--verbose] [--require-all]
                      [--min-pass-rate PERCENT] [--no-freeze-ints]

Each test is a directory DIR/test_*/ with model.onnx and test_data_set_*/input_*.pb,
output_*.pb (Debian's libonnx-testdata: /usr/share/libonnx-testdata/data/node). A test is
  unsupported (Op)         when an op type of its graph is not in `loomc --list-ops`, or
                           its model's opset is outside that op's listed range
                           (`Op opset N`); such tests are not run;
  passed                   when loom-run --forward ran every data set and every output
                           has the expected .pb's dtype and matches it (|got-want| <=
                           atol + rtol*|want|; NaN positions must match; integers and
                           bools exactly);
  unsupported (reason)     when loom-run's one-line error says an op, attribute, dtype or
                           shape is unsupported (contains "unsupported"/"not supported"),
                           or an input is not a plain tensor (sequence/optional);
  failed (reason)          otherwise.
`loom-run` runs with LOOMC set to --loomc, so both come from the same build.
Integer inputs of a data set (shapes, axes, split sizes, indices) and Dropout's ratio
and training_mode are frozen into initializers of a copy of the model before it runs,
as exported graphs hold them (`--no-freeze-ints` feeds them as inputs instead).

Prints one line per test with --verbose; always a table per op type (a test counts
under each op type of its graph, or, if unsupported for its ops, under those ops only),
the totals, and the pass rate over the tests whose ops are all supported.
Exit 0; 1 if a test of supported ops failed and is not listed in --known-failures
(default: node_conformance_known_failures.txt next to this script; one test name per
line, `# reason` comments), with --require-all if any test did not pass, or with
--min-pass-rate if the pass rate is below it; 2 on bad
usage or a missing binary or directory.
"""
import argparse
import concurrent.futures
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_outputs import compare_arrays  # noqa: E402

DEFAULT_DATA = "/usr/share/libonnx-testdata/data/node"
DEFAULT_KNOWN = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "node_conformance_known_failures.txt")
# loom-run's one-line error means "not implemented" rather than "wrong": it says so, or
# names the only thing that is supported ("... has element type int64; only float32 is
# supported").
UNSUPPORTED_RE = re.compile(r"unsupported|not supported|\bonly\b[^;:]{0,60}\b(is|are) supported",
                            re.IGNORECASE)


class Usage(Exception):
    pass


def list_ops(loomc):
    """{op type: (min opset, max opset)} from `loomc --list-ops` ('Add  7-17')."""
    try:
        r = subprocess.run([loomc, "--list-ops"], capture_output=True, text=True, timeout=60)
    except OSError as e:
        raise Usage("cannot run %s: %s" % (loomc, e.strerror or e))
    except subprocess.TimeoutExpired:
        raise Usage("%s --list-ops timed out" % loomc)
    if r.returncode != 0:
        raise Usage("%s --list-ops exited %d: %s" % (loomc, r.returncode,
                                                   (r.stderr or r.stdout).strip()[:200]))
    ops = {}
    for line in r.stdout.splitlines():
        m = re.match(r"^\s*([A-Za-z_][\w.]*)\s+(\d+)\s*(?:-\s*(\d+))?\s*(?:\s.*)?$", line)
        if m:
            lo = int(m.group(2))
            hi = int(m.group(3)) if m.group(3) else lo
            ops[m.group(1)] = (lo, hi)
    if not ops:
        raise Usage("no ops parsed from %s --list-ops output: %r" % (loomc, r.stdout[:200]))
    return ops


def graph_ops(graph, out):
    for node in graph.node:
        out.add(node.op_type if node.domain in ("", "ai.onnx") else node.domain + "." + node.op_type)
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                graph_ops(a.g, out)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for g in a.graphs:
                    graph_ops(g, out)
    return out


def default_opset(model):
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return imp.version
    return None


def value_kind(value_info):
    """"tensor_type", "sequence_type", "optional_type", ... of a graph input/output."""
    return value_info.type.WhichOneof("value") or "undefined"


def elem_type(value_info):
    """The ONNX element type of a tensor graph value (0 if none)."""
    return value_info.type.tensor_type.elem_type


def load_pb(path, declared=None):
    """(name, ndarray) of a TensorProto file; ValueError if it cannot be read as one.
    `declared`: the graph value's ONNX element type, if known."""
    with open(path, "rb") as f:
        data = f.read()
    t = onnx.TensorProto()
    try:
        t.ParseFromString(data)
        arr = numpy_helper.to_array(t)
        if onnx.TensorProto.BFLOAT16 in (t.data_type, declared) and arr.dtype == np.uint16:
            # NumPy has no bfloat16: the data (or this onnx) gives the bits;
            # their exact float32 is what loom-run reads and writes.
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
        return t.name, arr
    except Exception as e:  # noqa: BLE001
        raise ValueError("unreadable tensor %s: %s" % (os.path.basename(path),
                                                     str(e).strip().splitlines()[0][:100]))


class Test:
    def __init__(self, name, path):
        self.name = name
        self.path = path
        self.ops = set()
        self.status = None       # passed | failed | unsupported
        self.reason = ""
        self.blame = set()       # op types the result is counted under
        self.known = False

    def verdict(self):
        return self.status + (" (%s)" % self.reason if self.reason else "")


def classify_static(test, supported):
    """Sets test.ops and, if its ops are not all supported, the 'unsupported' verdict."""
    try:
        model = onnx.load(os.path.join(test.path, "model.onnx"))
    except Exception as e:  # noqa: BLE001
        test.status, test.reason = "failed", "cannot load model.onnx: %s" % str(e).splitlines()[0]
        return None
    ops = graph_ops(model.graph, set())
    for fn in model.functions:
        graph_ops(fn, ops)
    test.ops = ops
    opset = default_opset(model)
    missing = sorted(op for op in ops if op not in supported)
    if missing:
        test.status, test.reason, test.blame = "unsupported", " ".join(missing), set(missing)
        return None
    out_of_range = sorted(op for op in ops if opset is not None and
                          not supported[op][0] <= opset <= supported[op][1])
    if out_of_range:
        test.status = "unsupported"
        test.reason = " ".join("%s opset %d" % (op, opset) for op in out_of_range)
        test.blame = set(out_of_range)
        return None
    test.blame = set(ops)
    return model


def one_line(text):
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errs = [ln for ln in lines if "error" in ln.lower()]
    return (errs[-1] if errs else (lines[-1] if lines else ""))[:300]


def run_test(test, model, loom_run, loomc, rtol, atol, timeout, work_root,
             freeze_ints=True):
    """Runs every data set of `test` through loom-run --forward; sets its verdict."""
    work = tempfile.mkdtemp(prefix=test.name + ".", dir=work_root)
    try:
        inits = {t.name for t in model.graph.initializer}
        ins = [i for i in model.graph.input if i.name not in inits]
        in_names = [i.name for i in ins]
        out_names = [o.name for o in model.graph.output]
        odd = ["%s %s" % (v.name, value_kind(v)) for v in list(ins) + list(model.graph.output)
               if value_kind(v) != "tensor_type"]
        if odd:
            test.status, test.reason = "unsupported", "non-tensor graph value: " + ", ".join(odd)
            return
        sets = sorted(glob.glob(os.path.join(test.path, "test_data_set_*")))
        if not sets:
            test.status, test.reason = "failed", "no test_data_set_*"
            return
        env = dict(os.environ, LOOMC=loomc)
        env.setdefault("LOOM_NUM_THREADS", "1")
        flags = {n.input[i] for n in model.graph.node if n.op_type == "Dropout"
                 for i in (1, 2) if i < len(n.input)}
        for k, ds in enumerate(sets):
            args = [loom_run, "--forward", None]
            frozen = []  # integer inputs, frozen into initializers
            in_files = sorted(glob.glob(os.path.join(ds, "input_*.pb")),
                              key=lambda p: int(re.search(r"input_(\d+)", p).group(1)))
            for i, pb in enumerate(in_files):
                try:
                    name, arr = load_pb(pb, elem_type(ins[i]) if i < len(ins) else None)
                except ValueError as e:
                    test.status, test.reason = "unsupported", str(e)
                    return
                if not name:
                    if i >= len(in_names):
                        test.status, test.reason = "failed", "%s has no graph input" % os.path.basename(pb)
                        return
                    name = in_names[i]
                if freeze_ints and (arr.dtype.kind in "iu" or name in flags):
                    # Exported graphs hold shapes, axes, indices and
                    # Dropout's ratio and training_mode as constants; the
                    # node tests feed them as inputs.
                    frozen.append(numpy_helper.from_array(arr, name))
                    continue
                f = os.path.join(work, "in%d_%d.npy" % (k, i))
                np.save(f, arr)
                args += ["--input", "%s=%s" % (name, f)]
            model_path = os.path.join(test.path, "model.onnx")
            if frozen:
                m = onnx.ModelProto()
                m.CopyFrom(model)
                names = {t.name for t in frozen}
                kept = [i for i in m.graph.input if i.name not in names]
                del m.graph.input[:]
                m.graph.input.extend(kept)
                m.graph.initializer.extend(frozen)
                model_path = os.path.join(work, "frozen%d.onnx" % k)
                onnx.save(m, model_path)
            args[2] = model_path
            out_dir = os.path.join(work, "out%d" % k)
            args += ["--output-dir", out_dir]
            try:
                r = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env)
            except subprocess.TimeoutExpired:
                test.status, test.reason = "failed", "timeout after %ds" % timeout
                return
            except OSError as e:
                test.status, test.reason = "failed", "cannot run loom-run: %s" % (e.strerror or e)
                return
            if r.returncode != 0:
                msg = one_line(r.stderr) or one_line(r.stdout)
                msg = msg.replace("'%s'" % model_path, "model.onnx")
                msg = msg.replace(work + os.sep, "")
                if r.returncode < 0:
                    test.status, test.reason = "failed", "loom-run killed by signal %d %s" % (
                        -r.returncode, msg)
                elif UNSUPPORTED_RE.search(msg):
                    test.status, test.reason = "unsupported", msg
                else:
                    test.status, test.reason = "failed", "loom-run exit %d: %s" % (r.returncode, msg)
                return
            out_files = sorted(glob.glob(os.path.join(ds, "output_*.pb")),
                               key=lambda p: int(re.search(r"output_(\d+)", p).group(1)))
            for j, pb in enumerate(out_files):
                try:
                    outs = model.graph.output
                    name, want = load_pb(pb, elem_type(outs[j]) if j < len(outs) else None)
                except ValueError as e:
                    test.status, test.reason = "unsupported", "output: %s" % e
                    return
                if not name:
                    name = out_names[j] if j < len(out_names) else "output_%d" % j
                f = os.path.join(out_dir, name.replace("/", "_") + ".npy")
                if not os.path.exists(f):
                    test.status, test.reason = "failed", "no output %s.npy" % name
                    return
                try:
                    got = np.load(f, allow_pickle=False)
                except Exception as e:  # noqa: BLE001
                    test.status, test.reason = "failed", "unreadable output %s: %s" % (name, e)
                    return
                # The output is written in the graph's element type
                # (bfloat16 as its exact float32: NumPy has none).
                declared = elem_type(outs[j]) if j < len(outs) else 0
                if got.dtype != want.dtype and declared != onnx.TensorProto.BFLOAT16:
                    test.status, test.reason = "failed", "%s: dtype %s, expected %s" % (
                        name, got.dtype, want.dtype)
                    return
                ok, msg = compare_arrays(got, want, rtol, atol)
                if not ok:
                    where = name if len(sets) == 1 else "%s data set %d" % (name, k)
                    test.status, test.reason = "failed", "%s: %s" % (where, msg)
                    return
        test.status, test.reason = "passed", ""
    finally:
        shutil.rmtree(work, ignore_errors=True)


def read_known(path):
    known = {}
    if not path or not os.path.exists(path):
        return known
    with open(path) as f:
        for line in f:
            body, _, reason = line.partition("#")
            name = body.strip()
            if name:
                known[name] = reason.strip()
    return known


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--loom-run", required=True, help="the loom-run executable")
    p.add_argument("--loomc", required=True, help="the loomc executable (for --list-ops)")
    p.add_argument("--data-dir", default=DEFAULT_DATA, help="default " + DEFAULT_DATA)
    p.add_argument("--filter", default=None, help="regex on test names (re.search)")
    p.add_argument("--jobs", type=int, default=2, help="tests run in parallel (default 2)")
    p.add_argument("--rtol", type=float, default=1e-4)
    p.add_argument("--atol", type=float, default=1e-5)
    p.add_argument("--timeout", type=int, default=60, help="seconds per loom-run (default 60)")
    p.add_argument("--known-failures", default=DEFAULT_KNOWN,
                   help="file of test names expected to fail (default %s)"
                   % os.path.basename(DEFAULT_KNOWN))
    p.add_argument("--verbose", "-v", action="store_true", help="one line per test")
    p.add_argument("--require-all", action="store_true",
                   help="exit 1 unless every test passed (for suites written for loom, "
                   "where an unsupported test is a failure)")
    p.add_argument("--min-pass-rate", type=float, default=None, metavar="PERCENT",
                   help="exit 1 if the pass rate over the tests of supported ops is "
                   "below PERCENT")
    p.add_argument("--no-freeze-ints", dest="freeze_ints", action="store_false",
                   help="feed integer inputs as inputs instead of freezing them into "
                   "initializers")
    args = p.parse_args(argv)
    t0 = time.time()
    try:
        for b in (args.loom_run, args.loomc):
            if not (os.path.isfile(b) and os.access(b, os.X_OK)):
                raise Usage("%s is not an executable file" % b)
        if not os.path.isdir(args.data_dir):
            raise Usage("no test directory %s (Debian package libonnx-testdata)" % args.data_dir)
        try:
            flt = re.compile(args.filter) if args.filter else None
        except re.error as e:
            raise Usage("bad --filter: %s" % e)
        supported = list_ops(args.loomc)
    except Usage as e:
        print("node_conformance: error: %s" % e, file=sys.stderr)
        return 2
    loom_run = os.path.abspath(args.loom_run)
    loomc = os.path.abspath(args.loomc)
    known = read_known(args.known_failures)

    tests = []
    for d in sorted(os.listdir(args.data_dir)):
        path = os.path.join(args.data_dir, d)
        if not os.path.isfile(os.path.join(path, "model.onnx")):
            continue
        if flt and not flt.search(d):
            continue
        tests.append(Test(d, path))
    if not tests:
        print("node_conformance: error: no tests in %s%s" % (
            args.data_dir, " match %r" % args.filter if args.filter else ""), file=sys.stderr)
        return 2

    to_run = []
    for t in tests:
        model = classify_static(t, supported)
        if model is not None:
            to_run.append((t, model))
    work_root = tempfile.mkdtemp(prefix="loom-node-conformance.")
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            futs = [pool.submit(run_test, t, m, loom_run, loomc, args.rtol, args.atol,
                                args.timeout, work_root, args.freeze_ints)
                    for t, m in to_run]
            for f in futs:
                f.result()
    finally:
        shutil.rmtree(work_root, ignore_errors=True)

    ran = {t.name for t, _ in to_run}
    for t in tests:
        if t.status == "failed" and t.name in known:
            t.known = True
        if args.verbose:
            extra = "  [known failure: %s]" % (known[t.name] or "listed") if t.known else ""
            print("%s: %s%s" % (t.name, t.verdict(), extra))

    # Per op type table.
    table = {}
    for t in tests:
        for op in (t.blame or {"(model)"}):
            row = table.setdefault(op, {"passed": 0, "failed": 0, "unsupported": 0})
            row[t.status] += 1
    width = max(12, max(len(op) for op in table))
    print("%-*s %7s %7s %12s" % (width, "op type", "passed", "failed", "unsupported"))
    for op in sorted(table, key=str.lower):
        r = table[op]
        mark = "" if op in supported else "   (not in loomc --list-ops)"
        print("%-*s %7d %7d %12d%s" % (width, op, r["passed"], r["failed"], r["unsupported"], mark))

    count = lambda pred: sum(1 for t in tests if pred(t))  # noqa: E731
    n_pass = count(lambda t: t.status == "passed")
    n_fail = count(lambda t: t.status == "failed")
    n_known = count(lambda t: t.known)
    n_unsup = count(lambda t: t.status == "unsupported")
    print("total: %d tests: %d passed, %d failed (%d known), %d unsupported"
          % (len(tests), n_pass, n_fail, n_known, n_unsup))
    sup = [t for t in tests if t.name in ran]
    s_pass = sum(1 for t in sup if t.status == "passed")
    s_fail = sum(1 for t in sup if t.status == "failed")
    s_unsup = sum(1 for t in sup if t.status == "unsupported")
    rate = 100.0 * s_pass / len(sup) if sup else 0.0
    print("tests of supported ops (every op type listed by loomc, %d op types): %d run: "
          "%d passed, %d failed, %d unsupported at run time; pass rate %.1f%% "
          "(%.1f%% of passed+failed) (%.1fs)"
          % (len(supported), len(sup), s_pass, s_fail, s_unsup, rate,
             100.0 * s_pass / max(1, s_pass + s_fail), time.time() - t0))
    fixed = sorted(n for n in known if any(t.name == n and t.status == "passed" for t in tests))
    if fixed:
        print("note: listed as known failures but passed now (remove them from %s): %s"
              % (os.path.basename(args.known_failures), " ".join(fixed)))
    unexpected = [t for t in tests if t.status == "failed" and not t.known]
    if args.require_all:
        unexpected = [t for t in tests if t.status != "passed"]
    if unexpected:
        print("FAILED: %s" % " ".join(t.name for t in unexpected))
        return 1
    if args.min_pass_rate is not None and rate < args.min_pass_rate:
        print("FAILED: pass rate %.1f%% is below --min-pass-rate %g%%"
              % (rate, args.min_pass_rate))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
