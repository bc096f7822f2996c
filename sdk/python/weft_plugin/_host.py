"""Whether this code runs inside a component (componentize-py) or natively,
and, inside one, the generated bindings.

componentize-py imports the app at build time and snapshots the interpreter
(pre-initialization); at run time the component cannot load a module it
did not load then (there is no filesystem). So every binding the SDK uses
at call time is imported here, eagerly. The same holds for plugin code:
import what you need at the top of your module, not inside functions.
"""

try:
    import componentize_py_runtime  # noqa: F401  (exists only inside a component)
    import componentize_py_types as wit_result  # Ok, Err
    from wit_world import exports as wit_exports
    from wit_world.exports import k8s_task as wit_task
    from wit_world.imports import clock as wit_clock
    from wit_world.imports import log as wit_log
    from wit_world.imports import state as wit_state
    from wit_world.imports import types as wit_types

    _IN_COMPONENT = True
except ImportError:
    wit_result = wit_exports = wit_task = wit_clock = wit_log = wit_state = wit_types = None
    _IN_COMPONENT = False


# True while the build-time warm-up runs (see weft_plugin._warm): the host's
# imports do not exist yet, so log, clock and state answer without them.
warming = False


def in_component() -> bool:
    """True inside the built component, False in plain Python (unit tests)."""
    return _IN_COMPONENT
