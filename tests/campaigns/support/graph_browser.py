"""Browser-test helpers for the campaign page's search graph (static/js/campaign_graph.js).

The graph redraws on its own once after the page opens: when the campaign's websocket opens it
schedules a catch-up redraw (300 ms debounced). A test that reloads the graph and then waits for
the render count to reach a number races that redraw; these helpers wait for the socket to have
opened and the graph to be idle (nothing fetching, drawing or scheduled) instead.
"""

from tests.conftest import wait_for_js

GRAPH = "document.getElementById('search-graph')"


def graph_watch_socket(page) -> None:
    """Call before opening the campaign page: count its socket's openings (`htmx:wsOpen`, which
    bubbles to the document after the graph's own listener on <body> has scheduled the
    catch-up), so a test knows the catch-up is scheduled, or done, and not still to come."""
    page.add_init_script(
        "document.addEventListener('htmx:wsOpen', () => {"
        " window.__keSocketOpens = (window.__keSocketOpens || 0) + 1; });"
    )


def graph_settled(page, timeout: float = 30_000) -> None:
    """Wait until the graph is drawn, the socket has opened and its catch-up redraw is over."""
    wait_for_js(
        page,
        f"+({GRAPH}.dataset.renders || 0) > 0 && (window.__keSocketOpens || 0) > 0"
        " && window.keGraph.idle()",
        timeout,
    )


def graph_redraw(page, timeout: float = 30_000) -> None:
    """What a live event does (every page fetched again, merged, drawn), waited for by its
    own render: settled first, then one more render than before and idle again."""
    graph_settled(page, timeout)
    renders = int(page.get_attribute("#search-graph", "data-renders"))
    page.evaluate("window.keGraph.reload()")
    wait_for_js(page, f"+{GRAPH}.dataset.renders > {renders} && window.keGraph.idle()", timeout)
