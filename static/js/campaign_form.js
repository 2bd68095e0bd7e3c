// New campaign: while the portal checks an uploaded reference in the sandbox (a preview, or a
// start from an upload), say so with the time spent, and refuse a second submit meanwhile. The
// server ends the check at its limit with an error next to the problem file.
(function () {
  var form = document.getElementById("campaign-form");
  var progress = document.getElementById("reference-progress");
  if (!form || !progress) return;
  var busy = false;
  form.addEventListener("submit", function (event) {
    if (busy) { event.preventDefault(); return; }
    var upload = (form.elements.problem_file && form.elements.problem_file.files.length) ||
      (form.elements.problem_source && form.elements.problem_source.value);
    var preview = event.submitter && event.submitter.name === "preview";
    var interpret = form.elements.platform && form.elements.platform.value === "interpret";
    if (!upload && !(preview && interpret)) return;
    busy = true;
    form.setAttribute("aria-busy", "true");
    progress.hidden = false;
    var elapsed = progress.querySelector("[data-elapsed]");
    var t0 = Date.now();
    setInterval(function () {
      elapsed.textContent = Math.round((Date.now() - t0) / 1000) + " s so far";
    }, 1000);
  });
  // Back/forward cache: a restored page is not busy.
  window.addEventListener("pageshow", function () {
    busy = false;
    form.removeAttribute("aria-busy");
    progress.hidden = true;
  });
})();
