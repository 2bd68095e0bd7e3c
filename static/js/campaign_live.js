// Live campaign page: events arrive over the websocket as out-of-band htmx swaps. Whenever the
// socket (re)opens, fetch the live section once, so events sent before the connection (or while
// it was down) are caught up without losing the user's place on the page.
(function () {
  document.body.addEventListener("htmx:wsOpen", function () {
    var live = document.getElementById("campaign-live");
    if (!live) return;
    htmx.ajax("GET", live.dataset.liveUrl, { target: "#campaign-live", swap: "outerHTML" });
  });
})();
