"""What a cell of a notebook binds, read from its source (tests/test_steps.py's static check, tests/test_colab_runtime.py's
re-run of the test cells)."""


def bound_names(source):
    """The names a cell binds at the top level of the notebook's namespace (comprehensions, lambdas, functions and classes
    keep their own scopes; a def or class binds its own name)."""
    import ast

    scopes = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
    out = set()

    def visit(node):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
            return
        if isinstance(node, scopes):
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split('.')[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            out.add(node.name)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(source))
    return out
