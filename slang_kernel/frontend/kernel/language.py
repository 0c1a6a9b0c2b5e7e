"""Static knowledge of the Slang language: keywords, built-in types, intrinsics, language_info.

Used by the Pygments lexer, completion and inspection. The lists are deliberately plain data: they
are what a user types most often, not a full grammar (the compiler is the grammar).
"""

from __future__ import annotations

import re

__all__ = [
    "ATTRIBUTES",
    "BUILTIN_TYPES",
    "INTRINSICS",
    "KEYWORDS",
    "LANGUAGE_INFO",
    "SEMANTICS",
    "SWIZZLE",
    "is_vector_type",
    "vector_length",
]

KEYWORDS = (
    # declarations and modifiers
    "struct", "interface", "extension", "typedef", "typealias", "namespace", "enum", "class",
    "static", "const", "uniform", "groupshared", "in", "out", "inout", "ref", "let", "var", "func",
    "public", "private", "internal", "import", "module", "implementing", "__include", "__exported",
    "export", "extern", "inline", "property", "get", "set", "subscript", "init", "associatedtype",
    "where", "this", "This", "no_diff", "precise", "nointerpolation", "linear", "centroid",
    "row_major", "column_major", "volatile", "globallycoherent", "override", "__generic",
    # statements
    "if", "else", "for", "while", "do", "switch", "case", "default", "break", "continue", "return",
    "discard", "defer", "try", "throws", "throw", "catch", "is", "as", "new", "sizeof", "alignof",
    "true", "false", "none", "nullptr",
    # autodiff
    "fwd_diff", "bwd_diff", "diffPair", "detach",
)

_SCALARS = ("bool", "int", "uint", "float", "half", "double", "int8_t", "int16_t", "int32_t",
            "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t", "float16_t", "float32_t",
            "float64_t")
_VEC_BASES = ("bool", "int", "uint", "float", "half", "double")

BUILTIN_TYPES = tuple(
    [*_SCALARS, "void", "vector", "matrix", "Ptr", "Array", "Optional", "Tuple", "String",
     "DifferentialPair", "IDifferentiable", "IFloat", "IInteger", "IArithmetic", "IComparable",
     "StructuredBuffer", "RWStructuredBuffer", "ByteAddressBuffer", "RWByteAddressBuffer",
     "AppendStructuredBuffer", "ConsumeStructuredBuffer", "ConstantBuffer", "ParameterBlock",
     "Buffer", "RWBuffer", "Texture1D", "Texture2D", "Texture3D", "TextureCube", "Texture2DArray",
     "RWTexture1D", "RWTexture2D", "RWTexture3D", "RWTexture2DArray", "Sampler2D", "SamplerState",
     "SamplerComparisonState", "TensorView", "DiffTensorView"]
    + [f"{b}{n}" for b in _VEC_BASES for n in (2, 3, 4)]
    + [f"{b}{r}x{c}" for b in ("float", "half", "double", "int", "uint")
       for r in (2, 3, 4) for c in (2, 3, 4)]
)

INTRINSICS = (
    "abs", "acos", "all", "any", "asin", "atan", "atan2", "ceil", "clamp", "cos", "cosh", "cross",
    "ddx", "ddy", "degrees", "determinant", "distance", "dot", "exp", "exp2", "faceforward", "floor",
    "fma", "fmod", "frac", "frexp", "fwidth", "isfinite", "isinf", "isnan", "ldexp", "length", "lerp",
    "log", "log10", "log2", "mad", "max", "min", "modf", "mul", "normalize", "pow", "radians", "rcp",
    "reflect", "refract", "round", "rsqrt", "saturate", "sign", "sin", "sincos", "sinh", "smoothstep",
    "sqrt", "step", "tan", "tanh", "transpose", "trunc", "asfloat", "asint", "asuint", "f16tof32",
    "f32tof16", "countbits", "firstbithigh", "firstbitlow", "reversebits", "printf",
    "GroupMemoryBarrierWithGroupSync", "AllMemoryBarrierWithGroupSync", "DeviceMemoryBarrier",
    "GroupMemoryBarrier", "InterlockedAdd", "InterlockedMin", "InterlockedMax", "InterlockedAnd",
    "InterlockedOr", "InterlockedXor", "InterlockedExchange", "InterlockedCompareExchange",
    "WaveActiveSum", "WaveActiveMax", "WaveActiveMin", "WaveGetLaneIndex", "WaveGetLaneCount",
    "WaveReadLaneAt", "WaveActiveBallot", "WavePrefixSum", "select", "makeTuple", "makeArray",
    "Sample", "SampleLevel", "Load", "Store", "GetDimensions",
)

ATTRIBUTES = ("shader", "numthreads", "Differentiable", "BackwardDifferentiable", "ForwardDerivative",
              "BackwardDerivative", "PreferRecompute", "PreferCheckpoint", "ForceInline", "unroll",
              "loop", "MaxIters", "CUDAKernel", "AutoPyBindCUDA", "TreatAsDifferentiable",
              "playground", "vk::binding", "mutating", "require")

SEMANTICS = ("SV_DispatchThreadID", "SV_GroupThreadID", "SV_GroupID", "SV_GroupIndex", "SV_Position",
             "SV_Target", "SV_VertexID", "SV_InstanceID")

SWIZZLE = ("x", "y", "z", "w", "r", "g", "b", "a")

_VEC = re.compile(r"^(?:bool|int|uint|float|half|double|u?int(?:8|16|32|64)_t|float(?:16|32|64)_t)([1-4])$")
_VEC_T = re.compile(r"^vector\s*<\s*\w+\s*,\s*([1-4])\s*>$")


def vector_length(type_name: str) -> int:
    """4 for float4 or vector<float,4>, 0 for anything that is not a vector."""
    t = type_name.strip()
    m = _VEC.match(t) or _VEC_T.match(t)
    return int(m.group(1)) if m else 0


def is_vector_type(type_name: str) -> bool:
    return vector_length(type_name) > 0


LANGUAGE_INFO = {
    "name": "slang",
    "version": "2026",
    "mimetype": "text/x-slang",
    "file_extension": ".slang",
    # JupyterLab looks the name up first, then the mime: our Slang language (the labextension that
    # `python -m slang_kernel install` puts next to the kernelspec), else C++ highlighting
    "codemirror_mode": {"name": "slang", "mime": "text/x-c++src"},
    "pygments_lexer": "slang",
    "nbconvert_exporter": "script",
}
