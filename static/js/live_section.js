// Live sections: an element with data-live-section inside an htmx websocket (ws-connect)
// is re-fetched in place when a message arrives or the socket (re)opens, debounced, from
// data-live-url (default: this page). While the reader is typing in one of its fields, or has
// left unsent text in one, the refresh waits, so nothing they wrote is lost.
(function () {
  var timers = {};
  function busy(section) {
    var active = document.activeElement;
    if (active && section.contains(active) && /INPUT|TEXTAREA|SELECT/.test(active.tagName)) {
      return true;
    }
    // Anything the reader typed and has not sent yet (a draft comment, a rollback reason).
    var fields = section.querySelectorAll("textarea, input:not([type]), input[type=text]");
    return Array.prototype.some.call(fields, function (field) {
      return field.value !== field.defaultValue;
    });
  }
  function refresh(id) {
    var section = document.getElementById(id);
    if (!section) return;
    if (busy(section) || document.visibilityState !== "visible") {
      timers[id] = setTimeout(function () { refresh(id); }, 2000);
      return;
    }
    var url = section.dataset.liveUrl || window.location.pathname + window.location.search;
    htmx.ajax("GET", url, { target: "#" + id, select: "#" + id, swap: "outerHTML" });
  }
  function schedule(event) {
    document.querySelectorAll("[data-live-section]").forEach(function (section) {
      if (event.target && event.target.contains && !event.target.contains(section)) return;
      clearTimeout(timers[section.id]);
      timers[section.id] = setTimeout(function () { refresh(section.id); }, 300);
    });
  }
  document.body.addEventListener("htmx:wsAfterMessage", schedule);
  document.body.addEventListener("htmx:wsOpen", schedule);
})();
