#!/usr/bin/python3
"""How loomc's compile time grows with the graph: chains of 10k to 200k nodes.

Each model is one chain: a 16x16 MatMul (the one parameter), then N - 1 nodes
alternating Tanh and Mul by a scalar constant, on an 8x16 input, so the
training step has about 3 N instructions and half the forward values are kept
for the backward (the live set grows with N, as a deep model's does). Each
size is compiled with `loomc --global-batch 8 --loss mse --plan-only` (import,
autodiff, planning, lowering and the arena placement; no file written), the
sizes in alternating rounds so that all see the same machine load. Prints for
each size the median wall time, the microseconds per node, and the ratio of
that per-node time to the smallest size's with its spread over rounds: a
ratio near 1 at every size is linear growth, one that doubles with N is
quadratic. A JSON line with the figures ends the output.

  bench/compile_time.py --loomc build/bin/loomc [--sizes 10000,50000,100000,200000] [--rounds 3]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def chain_model(n, path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 16])
    inits = [numpy_helper.from_array(np.eye(16, dtype=np.float32), "w"),
             numpy_helper.from_array(np.array(0.5, dtype=np.float32), "c")]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["v0"], name="matmul")]
    for i in range(1, n):
        if i % 2:
            nodes.append(helper.make_node("Tanh", [f"v{i-1}"], [f"v{i}"], name=f"tanh{i}"))
        else:
            nodes.append(helper.make_node("Mul", [f"v{i-1}", "c"], [f"v{i}"], name=f"mul{i}"))
    nodes.append(helper.make_node("Identity", [f"v{n-1}"], ["y"], name="out"))
    graph = helper.make_graph(nodes, "chain", [x], [y], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def compile_once(loomc, model):
    start = time.perf_counter()
    subprocess.run([loomc, model, "--global-batch", "8", "--loss", "mse", "--plan-only",
                    "--quiet", "-o", os.devnull], check=True)
    return time.perf_counter() - start


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--loomc", required=True)
    p.add_argument("--sizes", default="10000,50000,100000,200000")
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    sizes = sorted(int(s) for s in a.sizes.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        models = {}
        for n in sizes:
            models[n] = os.path.join(tmp, f"chain{n}.onnx")
            chain_model(n, models[n])
        times = {n: [] for n in sizes}
        for _ in range(a.rounds):
            for n in sizes:
                times[n].append(compile_once(a.loomc, models[n]))
    base = sizes[0]
    print(f"{'nodes':>8} {'median s':>9} {'us/node':>8} {'per-node vs ' + str(base):>18} {'spread':>13}")
    rows = []
    for n in sizes:
        ratios = [(t / n) / (b / base) for t, b in zip(times[n], times[base])]
        med = statistics.median(times[n])
        row = {"nodes": n, "median_s": med, "us_per_node": med / n * 1e6,
               "per_node_ratio": statistics.median(ratios),
               "ratio_min": min(ratios), "ratio_max": max(ratios)}
        rows.append(row)
        print(f"{n:>8} {med:>9.2f} {row['us_per_node']:>8.1f} {row['per_node_ratio']:>18.2f} "
              f"{row['ratio_min']:>6.2f}-{row['ratio_max']:<6.2f}")
    print(json.dumps({"compile_time": rows}))


if __name__ == "__main__":
    sys.exit(main())
