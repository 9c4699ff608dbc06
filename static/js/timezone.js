// statestore-admin: times are shown in the browser's time zone (statestore_admin/dashboard/timezones.py).
// The server reads the zone from the "tz" cookie written here; the header's switch shows UTC instead
// ("tz_utc=1"). A page rendered before the cookie existed (the very first visit) is reloaded once.
(function () {
  "use strict";
  const YEAR = 60 * 60 * 24 * 365;

  function cookie(name) {
    const found = document.cookie.split("; ").find((part) => part.startsWith(name + "="));
    return found ? found.slice(name.length + 1) : null;
  }

  // Inside Airflow's frame (statestore_admin/framing.py) a Lax cookie is not kept when Airflow is another site,
  // and browsers blocking third-party cookies keep only partitioned ones: there the cookie is partitioned, as
  // the session's is (HTTPS only, as framing is).
  const framed = window.top !== window.self && location.protocol === "https:";

  function setCookie(name, value, maxAge) {
    const secure = location.protocol === "https:" ? "; Secure" : "";
    const site = framed ? "; SameSite=None; Secure; Partitioned" : "; SameSite=Lax" + secure;
    document.cookie = name + "=" + value + "; Path=/; Max-Age=" + maxAge + site;
  }

  // Load the page again by GET (a reload would repeat a POST that rendered this page).
  const again = () => location.replace(location.href.split("#")[0]);

  let browserZone = "UTC";
  try {
    browserZone = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
  } catch (error) { /* very old browsers: UTC */ }
  // IANA names are plain cookie text (the server does not URL-decode cookies); anything else is not a zone.
  if (!/^[A-Za-z0-9_+\-\/]+$/.test(browserZone)) browserZone = "UTC";

  if (cookie("tz") !== browserZone) {
    setCookie("tz", browserZone, YEAR);
    const shown = document.documentElement.dataset.timeZone;
    const wanted = cookie("tz_utc") === "1" ? "UTC" : browserZone;
    // Reload at most once per zone, so that a zone the server does not know cannot loop.
    if (shown && shown !== wanted && sessionStorage.getItem("tz-reloaded") !== wanted) {
      sessionStorage.setItem("tz-reloaded", wanted);
      again();
    }
  }

  document.addEventListener("click", (event) => {
    const button = event.target.closest("[data-time-zone-switch]");
    if (!button) return;
    setCookie("tz_utc", "1", button.dataset.timeZoneSwitch === "utc" ? YEAR : 0);
    again();
  });
})();
