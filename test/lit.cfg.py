# lit configuration for Loom's compiler tests.
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "Loom"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".onnxtext", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.loom_binary_dir, "test")
config.excludes = ["unit", "e2e", "fuzz", "models", "Inputs", "lit.cfg.py", "CMakeLists.txt"]
config.environment["FILECHECK_OPTS"] = "-enable-var-scope --allow-unused-prefixes=false"

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.loom_tools_dir, append_path=True)
config.substitutions.append(("%loom_src", config.loom_source_dir))
llvm_config.add_tool_substitutions(["loom-opt", "loomc"], [config.loom_tools_dir])
