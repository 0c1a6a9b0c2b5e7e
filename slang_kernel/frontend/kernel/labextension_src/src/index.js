// Slang for JupyterLab's and Notebook 7's editors: a CodeMirror 6 stream language built on the C-like
// legacy mode, registered as "slang" (mime text/x-slang, *.slang), which the Slang kernel's
// language_info names; and, in Python notebooks, `%%slang` cells: the IPython language gets a mixed
// parser that highlights everything after a first line `%%slang ...` as Slang (other cells stay Python).
// Built by scripts/build-labextension into ../labextension; the wheel installs that into
// <prefix>/share/jupyter/labextensions, `python -m slang_kernel install` copies it elsewhere.
import { IEditorLanguageRegistry } from "@jupyterlab/codemirror";
import { LanguageSupport, StreamLanguage } from "@codemirror/language";
import { parseMixed } from "@lezer/common";
import { clike } from "@codemirror/legacy-modes/mode/clike";
import { ILSPCodeExtractorsManager } from "@jupyterlab/lsp";
import { registerExtractors } from "./lsp";

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

const slangLanguage = StreamLanguage.define(slang);

// `%%slang`, `%%slang NAME --flags`: the first line of a cell (after blank lines, as IPython allows)
const CELL_MAGIC = /^(?:[ \t]*\n)*%%slang(?=[ \t\n])[^\n]*\n/;

// The Python parser still reads the whole cell (its tree keeps Python's folding and indentation for
// the magic line); the Slang parse is an overlay on the body, so only Slang's highlighting shows there.
const slangCells = parseMixed((node, input) => {
  if (!node.type.isTop) return null;
  const head = input.read(0, Math.min(input.length, 4096));
  const m = CELL_MAGIC.exec(head);
  if (!m || m[0].length >= input.length) return null;
  return { parser: slangLanguage.parser, overlay: [{ from: m[0].length, to: input.length }] };
});

// Python support with `%%slang` cells: the same language data (so Python-only extensions, such as
// JupyterLab's builtin-name decorations, still know where Python is) and the same extensions.
const withSlangCells = (support) =>
  new LanguageSupport(support.language.configure({ wrap: slangCells }), support.support);

// Patch the registry's IPython entries (LanguageDescription objects) in place: the notebook asks for
// text/x-ipython by mime type, and a second registration of that mime type is refused.
function patchPython(languages) {
  for (const mime of ["text/x-ipython", "text/x-python"]) {
    const spec = languages.findByMIME(mime, true);
    if (!spec || spec.__slangCells) continue;
    spec.__slangCells = true;
    let wrapped = null;
    const wrap = (support) => (wrapped ??= support && support.language && support.language.configure
      ? withSlangCells(support) : support);
    if (spec.support) spec.support = wrap(spec.support);
    const load = spec.load.bind(spec);
    spec.load = () => load().then((support) => (spec.support = wrap(support)));
  }
}

// A plugin of this extension (id slang-kernel-syntax:NAME), started with JupyterLab; `tokens` holds
// its `requires` and `optional` services, which `activate` gets after the app.
const plugin = (name, description, tokens, activate) =>
  ({ id: `slang-kernel-syntax:${name}`, description, autoStart: true, ...tokens, activate });

const language = plugin("language",
  "Slang syntax highlighting (Slang kernel cells, *.slang files, %%slang cells in Python notebooks)",
  { requires: [IEditorLanguageRegistry] },
  (_app, languages) => {
    languages.addLanguage({
      name: "slang",
      displayName: "Slang",
      mime: "text/x-slang",
      extensions: ["slang"],
      load: async () => new LanguageSupport(slangLanguage),
    });
    patchPython(languages);
  });

// Slang cells for language servers (see lsp.js): JupyterLab always provides the manager; only
// jupyterlab-lsp (pip install 'slang-kernel[lsp]') reads it.
const lspCells = plugin("lsp-cells",
  "Slang cells for jupyterlab-lsp: %%slang cells of Python notebooks, Python cells of Slang notebooks",
  { optional: [ILSPCodeExtractorsManager] },
  (_app, extractors) => {
    if (extractors) registerExtractors(extractors);
  });

export default [language, lspCells];
