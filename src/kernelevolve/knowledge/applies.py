"""Where a note applies, and the facts of a problem it is matched against.

A note may say where it applies, for the whole note (front matter `applies:`, a mapping) or for
one section (an HTML comment inside the section, which a rendered note does not show):

    <!-- applies: ops=exp,softmax; dtypes=bf16,fp16 -->

Keys: `dtypes` (float32/fp32, float16/fp16/half, bfloat16/bf16, fp8, float64, int, low for any
half-precision type), `ops` (torch op names such as exp, conv2d, layer_norm, or the op classes
below: math, softmax, reduction, norm, minmax, matmul, conv, copy), `platforms` and `languages`.
A section applies when every key it names matches the run; a key matches when any of its values
does. A section or note without `applies` is kept and ranked by its text, as before.

The problem's side is `ProblemFacts`: the reference's ops (read from its source, plus the ATen ops
the harness traced when a result carries them), the input dtypes, the platform and the language.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any, Iterable

KEYS = ("dtypes", "ops", "platforms", "languages")
COMMENT = re.compile(r"<!--\s*applies:(.*?)-->", re.S)

# Op classes: a torch op (functional, method, module or ATen name, lowercased, underscores at the
# ends stripped) belongs to every class that lists it.
_MATH = ("exp exp2 expm1 log log1p log2 log10 tanh sigmoid erf erfc erfinv gelu silu swish "
         "softplus mish elu selu celu logsigmoid pow sin cos tan asin acos atan atan2 sinh cosh "
         "asinh acosh atanh softmax log_softmax logsumexp scaled_dot_product_attention "
         "cross_entropy glu hardtanh_backward")
OP_CLASSES: dict[str, frozenset[str]] = {name: frozenset(ops.split()) for name, ops in {
    "math": _MATH,
    "softmax": "softmax log_softmax logsumexp scaled_dot_product_attention cross_entropy "
               "safe_softmax",
    "reduction": "sum mean amax amin max min prod var std norm argmax argmin cumsum cumprod "
                 "logsumexp softmax log_softmax layer_norm native_layer_norm group_norm "
                 "native_group_norm batch_norm native_batch_norm instance_norm rms_norm "
                 "fused_rms_norm var_mean std_mean linalg_vector_norm normalize all any "
                 "count_nonzero cross_entropy nll_loss mse_loss l1_loss",
    "norm": "layer_norm native_layer_norm group_norm native_group_norm batch_norm "
            "native_batch_norm instance_norm rms_norm fused_rms_norm var std var_mean std_mean "
            "normalize linalg_vector_norm norm layernorm batchnorm1d batchnorm2d batchnorm3d "
            "groupnorm rmsnorm instancenorm1d instancenorm2d",
    "minmax": "max amax maximum min amin minimum clamp clamp_min clamp_max clip relu relu6 "
              "hardtanh max_pool1d max_pool2d max_pool3d max_pool2d_with_indices softmax "
              "log_softmax fmax fmin",
    "matmul": "mm bmm matmul addmm baddbmm addbmm linear einsum mv addmv dot tensordot "
              "scaled_dot_product_attention bilinear",
    "conv": "conv1d conv2d conv3d convolution conv_transpose1d conv_transpose2d "
            "conv_transpose3d mkldnn_convolution cudnn_convolution",
    "copy": "clone copy contiguous permute transpose flip roll cat concat concatenate stack "
            "repeat repeat_interleave tile index_select gather narrow pad constant_pad_nd "
            "pixel_shuffle pixel_unshuffle unfold fold to_copy",
}.items()}
# Module classes (nn.Conv2d) as the functional op they run.
_MODULES = {"conv1d": "conv1d", "conv2d": "conv2d", "conv3d": "conv3d",
            "convtranspose1d": "conv_transpose1d", "convtranspose2d": "conv_transpose2d",
            "convtranspose3d": "conv_transpose3d", "linear": "linear", "layernorm": "layer_norm",
            "groupnorm": "group_norm", "rmsnorm": "rms_norm", "batchnorm1d": "batch_norm",
            "batchnorm2d": "batch_norm", "batchnorm3d": "batch_norm", "softmax": "softmax",
            "logsoftmax": "log_softmax", "gelu": "gelu", "silu": "silu", "tanh": "tanh",
            "sigmoid": "sigmoid", "relu": "relu", "mish": "mish", "elu": "elu",
            "softplus": "softplus", "maxpool2d": "max_pool2d", "maxpool1d": "max_pool1d",
            "instancenorm2d": "instance_norm", "hardtanh": "hardtanh"}
_DTYPES = {
    "float32": {"float32"}, "fp32": {"float32"}, "float": {"float32"},
    "float16": {"float16"}, "fp16": {"float16"}, "half": {"float16"},
    "bfloat16": {"bfloat16"}, "bf16": {"bfloat16"},
    "fp8": {"float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"},
    "float64": {"float64"}, "fp64": {"float64"}, "double": {"float64"},
    "low": {"float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
            "float8_e5m2fnuz"},
    "int": {"int8", "uint8", "int16", "int32", "int64"},
    "bool": {"bool"},
}


def op_name(name: str) -> str:
    return name.strip("_").lower()


def op_classes(ops: Iterable[str]) -> set[str]:
    names = {op_name(o) for o in ops}
    found = {cls for cls, members in OP_CLASSES.items() if names & members}
    if "exp" in names and names & {"sum", "amax", "max"}:
        found.add("softmax")  # written out (or traced) as max, exp, sum and divide
    return found


@dataclass(frozen=True)
class ProblemFacts:
    """What the notes are chosen by: the reference's ops and classes, dtypes, the target."""

    ops: frozenset[str]
    dtypes: frozenset[str]
    platform: str
    language: str

    @property
    def classes(self) -> set[str]:
        return op_classes(self.ops)

    def features(self) -> set[str]:
        return set(self.ops) | self.classes

    def terms(self) -> list[str]:
        """Words for retrieval and ranking: op names, op classes, dtype names."""
        short = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64"}
        words = sorted(self.classes) + sorted(self.ops)
        words += [short.get(d, d) for d in sorted(self.dtypes)]
        return list(dict.fromkeys(w for w in words if w))

    def with_ops(self, more: Iterable[str]) -> "ProblemFacts":
        extra = {op_name(o) for o in more if op_name(o)}
        if extra <= self.ops:
            return self
        return ProblemFacts(self.ops | extra, self.dtypes, self.platform, self.language)


def source_ops(source: str) -> set[str]:
    """The torch ops the reference's classes (`Model` and the modules it builds) call, read
    from its source: functions, methods, `nn` module classes, and the `@` operator. Input
    builders (`get_inputs`) are not read: their `randn` is no op of the problem."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    ops: set[str] = set()
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    for node in (inner for cls in classes for inner in ast.walk(cls)):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            ops.add("matmul")
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else \
            func.id if isinstance(func, ast.Name) else ""
        low = op_name(name)
        if not low or name in ("super", "__init__"):
            continue
        ops.add(_MODULES.get(low, low) if name[:1].isupper() else low)
    return ops


def parse_applies(raw: Any, fault) -> dict[str, list[str]]:
    """Validate an `applies` value: a mapping (front matter) or `key=a,b; key=c` (a comment)."""
    if raw is None:
        return {}
    if isinstance(raw, str):
        pairs: dict[str, Any] = {}
        for part in filter(None, (p.strip() for p in raw.split(";"))):
            key, eq, values = part.partition("=")
            if not eq:
                raise fault(f"applies: {part!r} is not key=value[,value]; keys: "
                            f"{', '.join(KEYS)}")
            pairs[key.strip()] = [v.strip() for v in values.split(",") if v.strip()]
        raw = pairs
    if not isinstance(raw, dict):
        raise fault(f"applies must be a mapping such as {{ops: [exp, softmax]}}, got {raw!r}")
    out: dict[str, list[str]] = {}
    for key, values in raw.items():
        if key not in KEYS:
            raise fault(f"applies: unknown key {key!r}; allowed: {', '.join(KEYS)}")
        values = [values] if isinstance(values, str) else values
        if not isinstance(values, list) or not values or not all(
                isinstance(v, str) and v.strip() for v in values):
            raise fault(f"applies.{key} must be a non-empty list of names, got {values!r}")
        out[key] = [v.strip().lower() for v in values]
    return out


def section_applies(text: str) -> tuple[dict[str, list[str]], str]:
    """A section's own `applies` comments (merged) and its text without them."""
    found: dict[str, list[str]] = {}
    for match in COMMENT.finditer(text):
        for key, values in parse_applies(match.group(1).strip(), ValueError).items():
            found.setdefault(key, []).extend(values)
    return found, COMMENT.sub("", text).strip()


def mismatch(applies: dict[str, list[str]], facts: ProblemFacts) -> str | None:
    """Why a note or section with these `applies` does not fit the problem, or None."""
    if not applies:
        return None
    if "dtypes" in applies:
        wanted = set().union(*(_DTYPES.get(v, {v}) for v in applies["dtypes"]))
        if not wanted & set(facts.dtypes):
            return f"for dtypes {', '.join(applies['dtypes'])}, not in the problem"
    if "ops" in applies:
        if not {op_name(v) for v in applies["ops"]} & facts.features():
            return f"for ops {', '.join(applies['ops'])}, not in the reference"
    for key, value in (("platforms", facts.platform), ("languages", facts.language)):
        if key in applies and value not in applies[key] and "any" not in applies[key]:
            return f"for {key} {', '.join(applies[key])}"
    return None


def targeted(applies: dict[str, list[str]]) -> bool:
    """Whether `applies` names the problem's ops or dtypes (a match is then a strong signal)."""
    return bool({"ops", "dtypes"} & set(applies))
