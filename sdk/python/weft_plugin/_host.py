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
    from wit_world.imports import clock as wit_clock
    from wit_world.imports import log as wit_log
    from wit_world.imports import state as wit_state

    _IN_COMPONENT = True
except ImportError:
    wit_result = wit_exports = wit_clock = wit_log = wit_state = None
    _IN_COMPONENT = False

# What differs between the worlds. componentize-py names an interface's
# module after the interface, or after its package too when two packages
# have an interface of that name: weft:plugin/types is `types` in the
# 0.1 worlds and `weft_plugin_types` in webapi-task-plugin, which also
# imports wasi:http/types (`wasi_http_types`). A world's export module
# exists only in a component of that world.
wit_types = wit_task = wit_webapi = None
wit_http = wit_http_out = wit_streams = None
if _IN_COMPONENT:
    try:
        from wit_world.imports import types as wit_types
    except ImportError:
        from wit_world.imports import weft_plugin_types as wit_types
    try:
        from wit_world.exports import k8s_task as wit_task
    except ImportError:
        pass
    try:
        from wit_world.exports import webapi_task as wit_webapi
        from wit_world.imports import outgoing_handler as wit_http_out
        from wit_world.imports import streams as wit_streams
        from wit_world.imports import wasi_http_types as wit_http
    except ImportError:
        pass


# True while the build-time warm-up runs (see weft_plugin._warm): the host's
# imports do not exist yet, so log, clock and state answer without them.
warming = False


def in_component() -> bool:
    """True inside the built component, False in plain Python (unit tests)."""
    return _IN_COMPONENT
