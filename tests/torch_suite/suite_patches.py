"""Run-time adjustments that let PyTorch's distributed test suite run here, with any backend.

Nothing here edits a system file. Three problems are solved in the importing process only:

1. `expecttest` is not packaged by Debian; common_utils imports it. The stand-in lives in
   stubs/, which goes on sys.path here (and only in processes that import this module).
2. torch 1.13's torch.distributed._shard does not import on Python 3.11: its metadata module
   gives a dataclass field a dataclass *instance* as default, which 3.11 rejects as a mutable
   default. Every DDP test imports it. A meta-path finder compiles that one module from its
   source with `default_factory=` instead.
3. The suite gates tests on backend names: DistTestCases sets in common_distributed and
   `BACKEND == "gloo"`-style comparisons, `require_backend({"gloo"})` and *_BACKENDS lists in
   distributed_test.py, all evaluated while the module is imported (decorators). To give a
   plug-in backend gloo's feature set, the sets get its name, and distributed_test.py is
   compiled from an AST in which each of those checks also accepts the plug-in's name. Line
   numbers are kept, so tracebacks point into the file on disk. Uses of gloo itself (an
   explicit `new_group(backend="gloo")`, `require_backends_available({"gloo"})`) are left alone.

Patched modules are compiled from source every time and their bytecode is never written, so
the system's __pycache__ never holds a patched module.
"""
import ast
import importlib.abc
import importlib.machinery
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
STUBS = os.path.join(HERE, "stubs")

SHARD_METADATA = "torch.distributed._shard.sharded_tensor.metadata"
COMMON_DISTRIBUTED = "torch.testing._internal.common_distributed"
DISTRIBUTED_TEST = "torch.testing._internal.distributed.distributed_test"

# What each patch did, for --verbose and for the sanity check that the rewrite still matches
# the installed torch (a rewrite that finds nothing means the suite changed under us).
applied = {}


class _PatchedSourceLoader(importlib.machinery.SourceFileLoader):
    """Compiles a module from its source through `transform(source, path) -> code`; no .pyc."""

    def __init__(self, fullname, path, transform):
        super().__init__(fullname, path)
        self._transform = transform

    def get_code(self, fullname):
        path = self.get_filename(fullname)
        source = self.get_data(path).decode("utf-8")
        return self._transform(source, path)


class _SourcePatchFinder(importlib.abc.MetaPathFinder):
    def __init__(self):
        self.transforms = {}

    def find_spec(self, fullname, path, target=None):
        transform = self.transforms.get(fullname)
        if transform is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
            return None
        spec.loader = _PatchedSourceLoader(fullname, spec.origin, transform)
        return spec


_finder = _SourcePatchFinder()


def _register(fullname, transform):
    if fullname in sys.modules:
        raise RuntimeError(f"{fullname} was imported before its patch was installed")
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)
    _finder.transforms[fullname] = transform


def _fix_shard_metadata(source, path):
    old = "field(default=TensorProperties())"
    if old in source:
        source = source.replace(old, "field(default_factory=TensorProperties)")
        applied["shard_metadata"] = "TensorProperties default -> default_factory"
    return compile(source, path, "exec", dont_inherit=True)


# ---- backend-name gates ---------------------------------------------------------------------

def _is_backend_name(node):
    """BACKEND, os.environ["BACKEND"]: the name of the backend under test."""
    if isinstance(node, ast.Name) and node.id == "BACKEND":
        return True
    return (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
            and node.slice.value == "BACKEND" and ast.unparse(node.value) == "os.environ")


def _is_gloo(node):
    """"gloo" or dist.Backend.GLOO."""
    if isinstance(node, ast.Constant):
        return node.value == "gloo"
    return isinstance(node, ast.Attribute) and node.attr == "GLOO"


class _GlooFeatureSet(ast.NodeTransformer):
    """Makes every gate that admits gloo admit `alias` too."""

    def __init__(self, alias):
        self.alias = alias
        self.counts = {"compare": 0, "require_backend": 0, "backend_list": 0}

    def _with_alias(self, literal):
        if any(_is_gloo(e) for e in literal.elts):
            literal.elts.append(ast.copy_location(ast.Constant(self.alias), literal.elts[-1]))
            return True
        return False

    def visit_Compare(self, node):
        self.generic_visit(node)
        if (len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.NotEq))
                and _is_backend_name(node.left) and _is_gloo(node.comparators[0])):
            op = ast.In() if isinstance(node.ops[0], ast.Eq) else ast.NotIn()
            names = ast.Tuple([ast.Constant("gloo"), ast.Constant(self.alias)], ast.Load())
            self.counts["compare"] += 1
            return ast.copy_location(ast.Compare(node.left, [op], [names]), node)
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == "require_backend":
            for arg in node.args:
                if isinstance(arg, (ast.Set, ast.List, ast.Tuple)) and self._with_alias(arg):
                    self.counts["require_backend"] += 1
        return node

    def visit_Assign(self, node):
        # PROFILING_SUPPORTED_BACKENDS and friends: allow-lists of dist.Backend values.
        self.generic_visit(node)
        if (len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id.endswith("_BACKENDS")
                and isinstance(node.value, (ast.List, ast.Set, ast.Tuple))
                and self._with_alias(node.value)):
            self.counts["backend_list"] += 1
        return node


def _distributed_test_transform(alias):
    def transform(source, path):
        tree = ast.parse(source, path)
        rewriter = _GlooFeatureSet(alias)
        tree = ast.fix_missing_locations(rewriter.visit(tree))
        if min(rewriter.counts.values()) == 0:
            raise RuntimeError(
                f"{path}: the gloo feature-set rewrite found no {rewriter.counts} "
                "gate of some kind; the installed suite differs from the one this runner knows")
        applied["distributed_test"] = dict(rewriter.counts)
        return compile(tree, path, "exec", dont_inherit=True)
    return transform


def _add_to_feature_sets(alias):
    from torch.testing._internal.common_distributed import DistTestCases
    added = []
    for key, names in DistTestCases.backend_feature.items():
        if "gloo" in names or key == "plugin":
            names.add(alias)
            added.append(key)
    applied["backend_feature"] = added


def install(backend):
    """Call before anything imports torch.testing; `backend` is the one under test.

    For gloo the suite is left as shipped (apart from the two import fixes), so the baseline
    is the stock suite.
    """
    if STUBS not in sys.path:
        sys.path.insert(0, STUBS)
    _register(SHARD_METADATA, _fix_shard_metadata)
    if backend != "gloo":
        _register(DISTRIBUTED_TEST, _distributed_test_transform(backend))
        _add_to_feature_sets(backend)
