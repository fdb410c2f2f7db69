"""hipDNN nodes -> the float64 reference ops: one module per op family.

Each module (named by its family's ``reference`` entry in ``graph/families.py``) maps the
family's node types to handlers in ``HANDLERS``: a handler reads the node's options and its
input arrays by port, calls the family's math in ``reference/ops`` and returns the outputs by
port. An optional ``check(node, graph)`` says why the reference refuses a node (one line) or
None. ``reference/executor.py`` builds its tables from these modules and walks the graph.
"""
