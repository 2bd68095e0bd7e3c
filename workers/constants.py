"""Names and numbers the evaluation core shares: gate names, rule names, default tolerances.

Everything a report may contain as a fixed string lives here, so the portal, the search and the
tests can refer to the same names.
"""

# Verdicts and statuses.
ACCEPTED = "accepted"
REJECTED = "rejected"
PASSED = "passed"
FAILED = "failed"
SKIPPED = "skipped"

# Gates, in the order they run.
GATE_STATIC = "static"
GATE_COMPILE = "compile"
GATE_CORRECTNESS = "correctness"
GATE_PERFORMANCE = "performance"
GATE_FITNESS = "fitness"
GATES = (GATE_STATIC, GATE_COMPILE, GATE_CORRECTNESS, GATE_PERFORMANCE, GATE_FITNESS)

# Platforms.
PLATFORM_INTERPRET = "interpret"
PLATFORM_CUDA = "cuda"
PLATFORMS = (PLATFORM_INTERPRET, PLATFORM_CUDA)

# Baselines a fitness can be measured against.
BASELINE_EAGER = "eager"
BASELINE_COMPILE = "compile"
BASELINE_MAX_AUTOTUNE = "max-autotune"
BASELINE_INCUMBENT = "incumbent"
# Per case, the fastest of the peers timed beside the candidate (compile, max-autotune, and the
# incumbent when one is given): the case is judged against that one, and says which it was.
BASELINE_BEST = "best"
BASELINES = (
    BASELINE_EAGER, BASELINE_COMPILE, BASELINE_MAX_AUTOTUNE, BASELINE_INCUMBENT, BASELINE_BEST,
)  # fmt: skip
PEERS = (BASELINE_COMPILE, BASELINE_MAX_AUTOTUNE, BASELINE_INCUMBENT)

# Case kinds.
CASE_WORKLOAD = "workload"
CASE_EDGE = "edge"
EDGE_TAIL = "edge:tail"
EDGE_EMPTY = "edge:empty"
EDGE_NONCONTIGUOUS = "edge:noncontiguous"
EDGE_LARGE_VALUES = "edge:large_values"
EDGE_INF = "edge:inf"

# Static rules (gate 1).
RULE_SYNTAX = "syntax_error"
RULE_NO_MODEL_NEW = "no_model_new"
RULE_NO_KERNEL = "no_triton_kernel"
RULE_KERNEL_NOT_LAUNCHED = "kernel_not_launched"
RULE_TORCH_FALLBACK = "torch_fallback"
RULE_REFERENCE_FALLBACK = "reference_fallback"
RULE_TRY_EXCEPT = "try_except_fallback"
RULE_THREAD = "thread"
RULE_SIDE_STREAM = "side_stream"
RULE_MONKEY_PATCH = "monkey_patch"
RULE_DYNAMIC_CODE = "dynamic_code"
RULE_PROCESS_SPAWN = "process_spawn"
RULE_INSTRUMENTATION_ESCAPE = "instrumentation_escape"  # switches off the op recorder

# Compile-gate rules (gate 2; run in the sandbox).
RULE_PROBLEM_LOAD = "problem_load_failed"
RULE_IMPORT = "import_failed"
RULE_INSTANTIATE = "instantiate_failed"
RULE_FORWARD_ERROR = "forward_failed"
RULE_NO_LAUNCH = "no_kernel_launched"
RULE_BACKEND = "backend_unavailable"  # the candidate's back end cannot run here
RULE_NEEDS_GPU = "needs_gpu"  # a CuTe kernel has no interpreter: correctness runs on cuda
RULE_CUTE_COMPILE = "cute_compile_failed"  # cute.compile refused the kernel (NVVM, tracing)
BACKEND_TRITON = "triton"
BACKEND_CUTE = "cute"
# Both in one candidate: each case shape dispatched to the back end that measured faster on it.
BACKEND_MIXED = "cute+triton"
BACKENDS = (BACKEND_TRITON, BACKEND_CUTE, BACKEND_MIXED)
BACKEND_LABELS = {
    BACKEND_TRITON: "Triton",
    BACKEND_CUTE: "CuTe DSL",
    BACKEND_MIXED: "CuTe DSL + Triton",
}
# The mode a problem's module runs in (workload "mode"): eval() unless the workload says train.
MODE_EVAL = "eval"
MODE_TRAIN = "train"
MODES = (MODE_EVAL, MODE_TRAIN)
RULE_TORCH_COMPUTE = "torch_compute_in_forward"
RULE_AOT_FAILED = "aot_compile_failed"
RULE_SANDBOX_VIOLATION = "sandbox_violation"
RULE_TIMEOUT = "timeout"
RULE_CRASH = "child_crashed"
RULE_EXIT = "child_exited"
RULE_MEMORY = "memory_limit"
RULE_OUTPUT_FLOOD = "output_flood"

# Correctness rules (gate 3).
RULE_SHAPE = "shape_mismatch"
RULE_DTYPE = "dtype_mismatch"
RULE_UNWRITTEN = "output_unwritten"
RULE_INPUT_MUTATED = "input_mutated"
RULE_ALIASING = "output_aliases_input"
RULE_TENSOR_SUBCLASS = "output_tensor_subclass"  # its torch functions could answer the checks
RULE_NAN = "nan_output"
RULE_NONFINITE = "nonfinite_mismatch"
RULE_MISMATCH = "mismatch"
RULE_NONDETERMINISTIC = "nondeterministic"
RULE_STALE = "stale_result"
# A buffer the forward updates (running statistics) left otherwise than the reference leaves it.
RULE_STATE = "state_mismatch"
RULE_RUNTIME = "runtime_error"

# Performance rules (gate 4).
RULE_BELOW_FLOOR = "below_physical_floor"
RULE_NOT_CAPTURABLE = "not_capturable"
RULE_TIMED_MISMATCH = "timed_output_mismatch"  # the timed calls compute what was not checked
RULE_UNSTABLE = "unstable"
RULE_NO_DEVICE = "no device"

# Fitness rules (gate 5).
RULE_REGRESSION = "regression"
RULE_NOT_FASTER = "not_significantly_faster"

# Default correctness contract (DESIGN.md §2).
DEFAULT_TOLERANCE = {
    "float32": {"atol": 1e-4, "rtol": 1e-4},
    "float16": {"atol": 1e-2, "rtol": 1e-2},
    "bfloat16": {"atol": 1e-2, "rtol": 1e-2},
    "float64": {"atol": 1e-8, "rtol": 1e-8},
}
EXACT = "exact"
DTYPES = ("float32", "float16", "bfloat16", "float64")

# Trials and sizes.
DEFAULT_TRIALS = 3
EDGE_TRIALS = 1
INTERPRET_MAX_ELEMENTS = 1 << 16  # per input; the Triton interpreter runs on numpy

# Sandbox limits.
DEFAULT_TIME_LIMIT_S = 120.0
CHILD_START_TIMEOUT_S = 180.0
CHILD_MEMORY_LIMIT_BYTES = 16 << 30  # resident set; address space on interpret
CHILD_MAX_PROCESSES = 4096  # per uid: every sandbox child's threads and helpers together
CHILD_MAX_FILE_BYTES = 2 << 30  # any one file the child writes (caches, IR, cubins)
CHILD_MAX_OPEN_FILES = 4096
OUTPUT_CAP_BYTES = 16 << 10  # kept per gate in the report (head and tail)
OUTPUT_FLOOD_BYTES = 4 << 20  # more than this printed in one gate kills the child
DEVICE_LOCK_ENV = "KERNELEVOLVE_DEVICE_LOCK"  # see workers/device_lock.py
DEVICE_LOCK_WAIT_S = 300.0  # past this a timing runs without the lock, and says so
DEVICE_LOCK_WAIT_SHARE = 0.4  # ... or past this share of the op's time limit
DEVICE_LOCK_FD_ENV = "KERNELEVOLVE_DEVICE_LOCK_FD"  # the descriptor a confined GPU run gets
OUTPUT_MARK_WAIT_S = 2.0  # how long a reply waits for the output printed before it
SECRET_ENV_PATTERN = (
    r"SECRET|KEY|TOKEN|PASSWORD|PASSWD|CREDENTIAL|DATABASE_URL|REDIS_URL|BROKER_URL"
)

# Compile artifacts.
IR_KINDS = ("ttir", "ttgir", "llir", "ptx")
IR_CAP_CHARS = 32 << 10
CUBIN_INLINE_BYTES = 64 << 10
DEFAULT_AOT_TARGET = ("cuda", 90, 64)

# Performance measurement. Serving modes: what decides a case's time (README, "Timing").
SERVING_GRAPH = "graph"  # device time from CUDA-graph replay (the default)
SERVING_EAGER = "eager"  # device time plus host overhead per call
SERVING_KERNELBENCH = "kernelbench"  # CUDA events around each call (published KernelBench)
SERVING_MODES = (SERVING_GRAPH, SERVING_EAGER, SERVING_KERNELBENCH)
MIN_ROUNDS = 15
MAX_ROUNDS = 60
ROUND_STEP = 5  # after MIN_ROUNDS, rounds go on in steps of this until settled (timing.settled)
ROUND_PRECISION = 0.005  # ...: every paired interval within +-0.5% of its centre
HOST_SAMPLES = 5  # graph mode: host overhead recorded in the first rounds only (not deciding)
TARGET_CASE_MS = 150.0  # paired rounds sized so each case takes about this long per side
TARGET_REPLAY_MS = 1.0  # calls per captured graph: about this long per replay
MAX_GRAPH_CALLS = 200
MIN_GRAPH_CALLS = 100
MAX_REPLAY_MS = 100.0  # ... as long as they take no longer than this (performance.graph_calls)
GRAPH_OUTPUT_BYTES = 1 << 30
SPIN_CYCLES = 200_000  # ~0.1 ms of device spin ahead of each timed replay
HOST_LOOP_CALLS = 50
MAX_INPUT_SETS = 64
INPUT_SETS_BYTES = 2 << 30
COMPILED_CACHE_ENTRIES = 64  # compiled references a child keeps for the next candidates
FRESH_PROCESS_FLOOR = 0.01  # a speedup interval is at least +-1% (between-process spread)
WARMUP_CALLS = 3
MIN_REPS = 20
MAX_REPS = 200
TARGET_TIMED_MS = 60.0
ROTATING_INPUT_SETS = 3
L2_FLUSH_BYTES = 256 << 20
BOOTSTRAP_RESAMPLES = 1000
COMPARE_CHUNK = 1 << 24  # elements the correctness gate compares at a time (float64)
PHYSICAL_FLOOR_SLACK = 0.9  # a median under 0.9 x floor is a measurement fault
REVIEW_SPEEDUP = 10.0
DEFAULT_REGRESSION_TOLERANCE = 0.02
