// Slang for JupyterLab's editors: a CodeMirror 6 stream language built on the C-like legacy mode,
// registered as "slang" (mime text/x-slang, *.slang), which the Slang kernel's language_info names.
// Built by scripts/build-labextension into ../labextension; `python -m slang_kernel install` copies
// that next to the kernelspec.
import { IEditorLanguageRegistry } from "@jupyterlab/codemirror";
import { LanguageSupport, StreamLanguage } from "@codemirror/language";
import { clike } from "@codemirror/legacy-modes/mode/clike";

const set = (...lists) => Object.fromEntries(lists.join(" ").split(/\s+/).filter(Boolean).map((w) => [w, true]));

const SCALARS = "bool int uint half float double int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t float16_t float32_t float64_t";
const SHAPED = SCALARS.split(" ").flatMap((t) => [2, 3, 4].flatMap((n) =>
  [`${t}${n}`, ...[2, 3, 4].map((m) => `${t}${n}x${m}`)])).join(" ");
const RESOURCES = `Texture1D Texture2D Texture3D TextureCube Texture1DArray Texture2DArray TextureCubeArray Texture2DMS
  RWTexture1D RWTexture2D RWTexture3D RWTexture1DArray RWTexture2DArray Sampler2D Sampler3D
  StructuredBuffer RWStructuredBuffer AppendStructuredBuffer ConsumeStructuredBuffer ByteAddressBuffer
  RWByteAddressBuffer Buffer RWBuffer ConstantBuffer ParameterBlock SamplerState SamplerComparisonState
  RaytracingAccelerationStructure TensorView DiffTensorView Ptr Optional Tuple Array vector matrix
  DifferentialPair IDifferentiable IFloat IInteger IArithmetic IComparable`;
const KEYWORDS = `if else for while do switch case default break continue return discard struct class interface
  extension enum namespace typedef typealias associatedtype import module implementing __include __exported
  public private internal static const uniform in out inout let var func where throws try catch
  property get set new operator __generic __subscript __init groupshared nointerpolation precise
  row_major column_major sizeof no_diff This this`;
const BUILTINS = `bwd_diff fwd_diff diffPair detach printf asfloat asint asuint isnan isinf isfinite`;

const cLike = clike({
  name: "slang",
  keywords: set(KEYWORDS),
  types: set(SCALARS, SHAPED, RESOURCES, "void"),
  builtin: set(BUILTINS),
  atoms: set("true false nullptr none"),
  blockKeywords: set("if else for while do switch struct class interface extension namespace"),
  defKeywords: set("struct class interface extension enum namespace typedef typealias associatedtype"),
  typeFirstDefinitions: true,
  hooks: {
    "#": (stream) => { stream.skipToEnd(); return "meta"; },
    // [shader("compute")], [numthreads(8, 8, 1)], [Differentiable], [[vk::binding(0)]]: attributes
    // open a line (an index expression never does)
    "[": (stream) => {
      if (stream.column() !== stream.indentation() && !stream.string.slice(0, stream.start).trimEnd().endsWith("]")) return false;
      let depth = 1;
      while (!stream.eol() && depth > 0) {
        const ch = stream.next();
        if (ch === "[") depth++;
        else if (ch === "]") depth--;
      }
      return "meta";
    },
  },
});

// JupyterLab's highlight style colours builtins but not type names: show Slang's types in the builtin
// colour (as it shows Python's int and float). The C-like mode still sees "type" (prevToken), so a name
// after a type is still recognised as a definition.
const slang = { ...cLike, token: (stream, state) => { const s = cLike.token(stream, state); return s === "type" ? "builtin" : s; } };

export default {
  id: "slang-kernel-syntax:language",
  description: "Slang syntax highlighting",
  autoStart: true,
  requires: [IEditorLanguageRegistry],
  activate: (_app, languages) => {
    languages.addLanguage({
      name: "slang",
      displayName: "Slang",
      mime: "text/x-slang",
      extensions: ["slang"],
      load: async () => new LanguageSupport(StreamLanguage.define(slang)),
    });
  },
};
