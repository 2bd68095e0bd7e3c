// Candidate page: a comment added elsewhere (another reader, the API) re-fetches the comment
// section in place, unless this reader is writing one (then it waits until they are done).
(function () {
  var timer = null;
  function writing() {
    var form = document.getElementById("comment-form");
    if (!form) return false;
    var active = document.activeElement;
    var body = form.querySelector("textarea, input[name=body]");
    return (active && form.contains(active)) || (body && body.value.trim() !== "");
  }
  function refresh() {
    if (!document.getElementById("comments")) return;
    if (writing()) {
      timer = setTimeout(refresh, 2000);
      return;
    }
    htmx.ajax("GET", window.location.pathname, {
      target: "#comments", select: "#comments", swap: "outerHTML",
    });
  }
  document.body.addEventListener("htmx:wsAfterMessage", function () {
    clearTimeout(timer);
    timer = setTimeout(refresh, 200);
  });
})();
