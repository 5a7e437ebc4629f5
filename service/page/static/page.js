// fibertensor web page: a client of the public /v1 API, nothing more.
// API data is only ever inserted as text (textContent, attributes), never as HTML.
"use strict";

(() => {
  const KEY_STORAGE = "fibertensor.apiKey";
  const TERMINAL = new Set(["succeeded", "failed", "cancelled"]);
  const POLL_MS = 1500;
  const PAGE_SIZE = 20;
  const IMAGE_NAME = /\.(png|jpe?g|gif|webp)$/i;
  const SUBMIT_PATH = /^\/v1\/jobs\/([^/{}]+)$/;

  const $ = (id) => document.getElementById(id);

  // el("a", {href: "/x", text: "hi"}, child, ...): a DOM element; text goes in as text only.
  function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs)) {
      if (value === undefined || value === null || value === false) continue;
      if (name === "text") node.textContent = value;
      else node.setAttribute(name, value === true ? "" : String(value));
    }
    for (const child of children) {
      if (child !== null && child !== undefined) node.append(child);
    }
    return node;
  }

  function announce(text) {
    $("announce").textContent = text;
  }

  function formatBytes(n) {
    const units = ["bytes", "KB", "MB", "GB", "TB"];
    let i = 0;
    while (n >= 1000 && i < units.length - 1) { n /= 1000; i += 1; }
    return i === 0 ? `${n} bytes` : `${n.toFixed(1)} ${units[i]}`;
  }

  function formatTime(iso) {
    return iso ? el("time", { datetime: iso, text: new Date(iso).toLocaleString() }) : "—";
  }

  function formatSeconds(from, to) {
    const s = (new Date(to) - new Date(from)) / 1000;
    return s < 60 ? `${s.toFixed(1)} s` : `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
  }

  // ---- the API -----------------------------------------------------------------------

  class ApiProblem extends Error {
    constructor(status, problem) {
      super(problem.detail || problem.title || `HTTP ${status}`);
      this.status = status;
      this.problem = problem;
    }
  }

  function authHeaders() {
    const key = sessionStorage.getItem(KEY_STORAGE);
    return key ? { "X-API-Key": key } : {};
  }

  function problemFrom(status, text) {
    try {
      const body = JSON.parse(text);
      if (body && typeof body === "object") return body;
    } catch (_) { /* not JSON: a proxy's page */ }
    return { title: `HTTP ${status}`, detail: text.slice(0, 500) || `the server answered ${status}` };
  }

  // A successful answer, or an ApiProblem thrown; a 401 asks for a key instead.
  async function send(method, path, cache = "no-store") {
    const response = await fetch(path, { method, headers: authHeaders(), cache });
    if (response.status === 401) return authNeeded(await response.text());
    if (!response.ok) throw new ApiProblem(response.status, problemFrom(response.status, await response.text()));
    return response;
  }

  async function api(method, path) {
    const response = await send(method, path);
    return response.status === 204 ? null : response.json();
  }

  // Result URLs are absolute; keep them on this page's origin (a proxy may rewrite hosts).
  function localPath(url) {
    const parsed = new URL(url, location.href);
    return parsed.pathname + parsed.search;
  }

  async function fetchBlob(path) {
    return (await send("GET", path, "default")).blob();
  }

  // A download link. Without an API key the browser fetches (and streams to disk) itself;
  // with one, the key must go in a header, so the file is fetched here and handed over.
  function downloadLink(path, filename, text, attrs = {}) {
    const link = el("a", { href: path, download: filename, text, ...attrs });
    link.addEventListener("click", async (event) => {
      if (!sessionStorage.getItem(KEY_STORAGE)) return;
      event.preventDefault();
      try {
        const url = URL.createObjectURL(await fetchBlob(path));
        const temporary = el("a", { href: url, download: filename });
        document.body.append(temporary);
        temporary.click();
        temporary.remove();
        setTimeout(() => URL.revokeObjectURL(url), 60000);
      } catch (error) {
        announce(`Download failed: ${error.message}`);
      }
    });
    return link;
  }

  // ---- authentication ------------------------------------------------------------------

  let authWaiter = null;

  // Called on any 401: ask for a key, then let the caller start over.
  function authNeeded(text) {
    const problem = problemFrom(401, text);
    const hadKey = Boolean(sessionStorage.getItem(KEY_STORAGE));
    sessionStorage.removeItem(KEY_STORAGE);
    $("main").hidden = true;
    $("auth").hidden = false;
    $("forget-key").hidden = true;
    $("err-api-key").textContent = hadKey ? problem.detail : "";
    $("api-key").setAttribute("aria-invalid", hadKey ? "true" : "false");
    $("api-key").focus();
    if (!authWaiter) authWaiter = new Promise(() => {}); // the page restarts once a key is given
    return authWaiter;
  }

  function setUpAuthForm() {
    $("auth-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const key = $("api-key").value.trim();
      if (!key) {
        $("err-api-key").textContent = "Type the API key the server's operator gave you.";
        return;
      }
      sessionStorage.setItem(KEY_STORAGE, key);
      location.reload();
    });
    $("forget-key").addEventListener("click", () => {
      sessionStorage.removeItem(KEY_STORAGE);
      location.reload();
    });
  }

  // ---- forms from the OpenAPI document -------------------------------------------------

  // A JSON pointer "#/a/b" resolved against the form schema first (pydantic's $defs live
  // there), then against the whole document.
  function deref(node, roots) {
    let seen = 0;
    while (node && node.$ref && seen < 16) {
      const parts = node.$ref.replace(/^#\//, "").split("/").map(decodeURIComponent);
      const found = roots.map((root) => parts.reduce((at, key) => (at ? at[key] : undefined), root)).find(Boolean);
      node = found ? { ...found, ...Object.fromEntries(Object.entries(node).filter(([k]) => k !== "$ref")) } : {};
      seen += 1;
    }
    return node || {};
  }

  function limitsText(spec) {
    const parts = [];
    const low = spec.minimum ?? spec.exclusiveMinimum;
    const high = spec.maximum ?? spec.exclusiveMaximum;
    const open = (v, strict) => (strict !== undefined ? `${v} (excluded)` : `${v}`);
    if (low !== undefined && high !== undefined) parts.push(`from ${open(low, spec.exclusiveMinimum)} to ${open(high, spec.exclusiveMaximum)}`);
    else if (low !== undefined) parts.push(`at least ${open(low, spec.exclusiveMinimum)}`);
    else if (high !== undefined) parts.push(`at most ${open(high, spec.exclusiveMaximum)}`);
    if (spec.maxLength !== undefined) parts.push(`up to ${spec.maxLength} characters`);
    return parts.join(", ");
  }

  // One form field of a job kind, described from its JSON schema.
  function fieldSpec(name, raw, required, roots) {
    const prop = deref(raw, roots);
    const spec = { name, required, description: prop.description || "", default: prop.default };
    if (prop.format === "binary") {
      return { ...spec, widget: "file", suffixes: prop["x-suffixes"] || [] };
    }
    const variants = (prop.anyOf || prop.oneOf || [prop]).map((v) => deref(v, roots)).filter((v) => v.type !== "null");
    const choices = variants.flatMap((v) => (v.enum ? v.enum : v.const !== undefined ? [v.const] : []));
    const open = variants.filter((v) => !v.enum && v.const === undefined);
    if (open.length === 0 && choices.length) return { ...spec, widget: "select", choices };
    if (open.length === 1 && choices.length === 0) {
      const v = open[0];
      const merged = { ...spec, limits: limitsText(v), minimum: v.minimum, maximum: v.maximum, maxLength: v.maxLength };
      if (v.type === "boolean") return { ...merged, widget: "select", choices: [true, false] };
      if (v.type === "integer" || v.type === "number") return { ...merged, widget: "number", integer: v.type === "integer" };
      // lists travel as one text field too (e.g. 8,8,4; the description says so)
      return { ...merged, widget: "text" };
    }
    // a union such as "same" or an integer: free text, the named values suggested
    const kinds = open.map((v) => `${v.type || "value"}${limitsText(v) ? ` ${limitsText(v)}` : ""}`);
    const named = choices.map((c) => JSON.stringify(c));
    return { ...spec, widget: "text", choices, hint: [...named, ...kinds].join(" or ") };
  }

  function kindsFrom(doc) {
    const kinds = [];
    for (const [path, item] of Object.entries(doc.paths || {})) {
      const match = SUBMIT_PATH.exec(path);
      const operation = item.post;
      const form = operation && operation.requestBody && operation.requestBody.content
        && operation.requestBody.content["multipart/form-data"];
      if (!match || !form) continue;
      const roots = [form.schema, doc];
      const schema = deref(form.schema, roots);
      const required = new Set(schema.required || []);
      const fields = Object.entries(schema.properties || {}).map(([name, prop]) => fieldSpec(name, prop, required.has(name), roots));
      kinds.push({ name: match[1], summary: operation.summary || "", path, fields });
    }
    return kinds;
  }

  function helpText(spec) {
    const parts = [];
    if (spec.description) parts.push(spec.description);
    if (spec.hint) parts.push(`Give ${spec.hint}.`);
    if (spec.limits) parts.push(`Allowed: ${spec.limits}.`);
    if (spec.default !== undefined && spec.default !== null) parts.push(`Default: ${JSON.stringify(spec.default)}.`);
    else if (!spec.required && spec.widget !== "file") parts.push("Optional.");
    return parts.map((p) => (/[.!?]$/.test(p) ? p : `${p}.`)).join(" ");
  }

  function inputFor(spec, id, describedBy) {
    const common = { id, name: spec.name, "aria-describedby": describedBy, required: spec.required };
    if (spec.widget === "select") {
      const select = el("select", common);
      if (spec.default === undefined || spec.default === null) select.append(el("option", { value: "", text: "(not set)" }));
      for (const choice of spec.choices) {
        select.append(el("option", { value: String(choice), text: String(choice), selected: choice === spec.default }));
      }
      return select;
    }
    const value = spec.default === undefined || spec.default === null ? undefined
      : Array.isArray(spec.default) ? spec.default.join(",") : String(spec.default);
    if (spec.widget === "number") {
      return el("input", { ...common, type: "number", inputmode: spec.integer ? "numeric" : "decimal",
        step: spec.integer ? 1 : "any", min: spec.minimum, max: spec.maximum, value });
    }
    const input = el("input", { ...common, type: "text", maxlength: spec.maxLength, value });
    if (spec.choices && spec.choices.length) {
      const list = el("datalist", { id: `${id}-choices` }, ...spec.choices.map((c) => el("option", { value: String(c) })));
      input.setAttribute("list", list.id);
      return el("span", { class: "with-list" }, input, list);
    }
    return input;
  }

  // ---- the submit form -------------------------------------------------------------------

  const chosen = { files: [], folder: null };

  function primarySlot(kind) {
    return kind.fields.find((f) => f.widget === "file" && f.required) || kind.fields.find((f) => f.widget === "file");
  }

  function matchesSuffix(spec, name) {
    const lower = name.toLowerCase();
    return !spec.suffixes.length || spec.suffixes.some((s) => lower.endsWith(s.toLowerCase()));
  }

  function showChosen(spec) {
    const list = $("chosen-files");
    list.replaceChildren();
    const { files, folder } = chosen;
    if (!files.length) {
      list.append(el("p", { text: folder ? `The folder “${folder}” holds no ${spec.suffixes.join(" or ")} files.` : "No file chosen." }));
      return;
    }
    const total = files.reduce((sum, f) => sum + f.size, 0);
    const what = files.length === 1 ? "1 file" : `${files.length} files, one job each`;
    list.append(el("p", { text: `${what}${folder ? ` from the folder “${folder}”` : ""} (${formatBytes(total)}):` }));
    list.append(el("ul", {}, ...files.map((f) => el("li", { text: `${f.name} — ${formatBytes(f.size)}` }))));
  }

  function choose(spec, files, folder) {
    chosen.files = files.filter((f) => matchesSuffix(spec, f.name)).sort((a, b) => a.name.localeCompare(b.name));
    const skipped = files.length - chosen.files.length;
    chosen.folder = folder;
    const label = document.querySelector("#kind-fields [name=label]");
    if (folder && label && !label.value.trim()) label.value = folder;
    showChosen(spec);
    if (skipped) $("chosen-files").append(el("p", { text: `${skipped} other file(s) left out: not ${spec.suffixes.join(" or ")}.` }));
  }

  // Files of a dropped folder (its top level, as `fibertensor submit FOLDER` takes them).
  async function folderFiles(entry) {
    const reader = entry.createReader();
    const entries = [];
    for (;;) {
      const batch = await new Promise((resolve, reject) => reader.readEntries(resolve, reject));
      if (!batch.length) break;
      entries.push(...batch);
    }
    const files = entries.filter((e) => e.isFile).map((e) => new Promise((resolve, reject) => e.file(resolve, reject)));
    return Promise.all(files);
  }

  function dropZone(spec, id, describedBy) {
    const pick = el("input", { type: "file", id, name: spec.name, multiple: true, "aria-describedby": describedBy,
      accept: spec.suffixes.join(",") || undefined, required: spec.required });
    const pickFolder = el("input", { type: "file", id: `${id}-folder`, webkitdirectory: true, "aria-describedby": describedBy });
    pick.addEventListener("change", () => choose(spec, [...pick.files], null));
    pickFolder.addEventListener("change", () => {
      const files = [...pickFolder.files].filter((f) => f.webkitRelativePath.split("/").length === 2);
      const folder = pickFolder.files.length ? pickFolder.files[0].webkitRelativePath.split("/")[0] : null;
      choose(spec, files, folder);
    });
    const zone = el("div", { class: "drop-zone", id: "drop-zone" },
      el("p", { class: "drop-hint", text: "Drop files or a folder here, or choose them. A folder is a batch: one job per file, labelled with the folder's name." }),
      el("div", { class: "pickers" },
        pick,
        el("span", {}, el("label", { for: `${id}-folder`, text: "or a folder:" }), pickFolder)),
      el("div", { id: "chosen-files", class: "chosen" }));
    zone.addEventListener("dragover", (event) => { event.preventDefault(); zone.classList.add("over"); });
    zone.addEventListener("dragleave", () => zone.classList.remove("over"));
    zone.addEventListener("drop", async (event) => {
      event.preventDefault();
      zone.classList.remove("over");
      const entries = [...event.dataTransfer.items].map((item) => item.webkitGetAsEntry && item.webkitGetAsEntry()).filter(Boolean);
      if (entries.length === 1 && entries[0].isDirectory) choose(spec, await folderFiles(entries[0]), entries[0].name);
      else choose(spec, [...event.dataTransfer.files], null);
    });
    return zone;
  }

  function renderKindForm(kind) {
    const holder = $("kind-fields");
    holder.replaceChildren();
    $("kind-help").textContent = kind.summary;
    const primary = primarySlot(kind);
    chosen.files = [];
    chosen.folder = null;
    const files = el("fieldset", {}, el("legend", { text: "Input files" }));
    const params = el("fieldset", { class: "params" }, el("legend", { text: "Parameters" }));
    for (const spec of kind.fields) {
      const id = `f-${spec.name}`;
      const help = el("p", { class: "help", id: `help-${spec.name}`, text: helpText(spec) });
      const error = el("p", { class: "error", id: `err-${spec.name}`, role: "alert" });
      const describedBy = `help-${spec.name} err-${spec.name}`;
      const labelText = `${spec.name}${spec.required ? " (required)" : ""}`;
      let control;
      if (spec === primary) control = dropZone(spec, id, describedBy);
      else if (spec.widget === "file") control = el("input", { type: "file", id, name: spec.name, "aria-describedby": describedBy, accept: spec.suffixes.join(",") || undefined });
      else control = inputFor(spec, id, describedBy);
      const field = el("div", { class: "field", "data-field": spec.name }, el("label", { for: id, text: labelText }), control, help, error);
      (spec.widget === "file" ? files : params).append(field);
    }
    holder.append(files, params);
    if (primary) showChosen(primary);
  }

  function clearErrors(form) {
    for (const node of form.querySelectorAll(".error")) node.textContent = "";
    for (const node of form.querySelectorAll("[aria-invalid]")) node.removeAttribute("aria-invalid");
  }

  // The field a problem names: its `errors` list, or the field its detail starts with or quotes.
  function fieldsNamed(problem, names) {
    const found = new Map();
    for (const error of problem.errors || []) {
      const name = String(error.field || "").split(".")[0];
      if (names.has(name)) found.set(name, `${error.field}: ${error.message}`);
    }
    if (found.size) return found;
    const detail = problem.detail || problem.title || "";
    const candidates = [
      ...[...detail.matchAll(/field(?:\(s\))? '?([A-Za-z_][\w-]*)/g)].map((m) => m[1]),
      ...[...detail.matchAll(/(?:^|: )([A-Za-z_][\w-]*): /g)].map((m) => m[1]),
      ...[...detail.matchAll(/'([A-Za-z_][\w-]*)'/g)].map((m) => m[1]),
    ];
    const name = candidates.find((c) => names.has(c));
    if (name) found.set(name, detail);
    return found;
  }

  function showProblem(form, problem, prefix, names) {
    const named = fieldsNamed(problem, names);
    if (!named.size) named.set("form", problem.detail || problem.title);
    for (const [name, message] of named) {
      const box = $(`err-${name}`);
      const text = `${prefix}${message}`;
      box.textContent = box.textContent ? `${box.textContent}\n${text}` : text;
      const input = $(`f-${name}`);
      if (input) input.setAttribute("aria-invalid", "true");
    }
  }

  function upload(path, body, onProgress) {
    return new Promise((resolve, reject) => {
      const request = new XMLHttpRequest();
      request.open("POST", path);
      for (const [name, value] of Object.entries(authHeaders())) request.setRequestHeader(name, value);
      request.upload.addEventListener("progress", (event) => onProgress(event.loaded, event.total));
      request.addEventListener("load", () => {
        if (request.status === 202) resolve(JSON.parse(request.responseText));
        else if (request.status === 401) authNeeded(request.responseText);
        else reject(new ApiProblem(request.status, problemFrom(request.status, request.responseText)));
      });
      request.addEventListener("error", () => reject(new ApiProblem(0, {
        title: "Network error", detail: "the upload did not reach the server; check the connection and send it again" })));
      request.send(body);
    });
  }

  function showUpload(done, total) {
    $("upload-status").hidden = false;
    $("upload-progress").value = total ? done / total : 0;
    $("upload-text").textContent = `${formatBytes(done)} of ${formatBytes(total)}`;
  }

  async function submitJobs(kind, form) {
    clearErrors(form);
    const primary = primarySlot(kind);
    const names = new Set([...kind.fields.map((f) => f.name), "form"]);
    if (!chosen.files.length) {
      $(`err-${primary.name}`).textContent = `Choose or drop a ${primary.suffixes.join(" or ")} file for ${primary.name}.`;
      $(`f-${primary.name}`).focus();
      return;
    }
    const common = new FormData();
    for (const spec of kind.fields) {
      if (spec === primary) continue;
      const input = $(`f-${spec.name}`);
      if (spec.widget === "file") {
        if (input.files.length) common.append(spec.name, input.files[0], input.files[0].name);
      } else if (input.value.trim() !== "") {
        common.append(spec.name, input.value.trim());
      }
    }
    if (chosen.folder && !common.get("label")) common.append("label", chosen.folder);
    const extraBytes = [...common.values()].reduce((sum, v) => sum + (v instanceof File ? v.size : 0), 0);
    const total = chosen.files.reduce((sum, f) => sum + f.size + extraBytes, 0);
    const submitted = [];
    let sent = 0;
    let failed = 0;
    $("submit-button").disabled = true;
    showUpload(0, total);
    try {
      for (const file of chosen.files) {
        const body = new FormData();
        body.append(primary.name, file, file.name);
        for (const [name, value] of common.entries()) body.append(name, value);
        const size = file.size + extraBytes;
        try {
          submitted.push(await upload(kind.path, body, (loaded, all) => showUpload(sent + (size * loaded) / (all || 1), total)));
        } catch (error) {
          failed += 1;
          showProblem(form, error.problem, chosen.files.length > 1 ? `${file.name}: ` : "", names);
        }
        sent += size;
        showUpload(sent, total);
      }
    } finally {
      $("submit-button").disabled = false;
    }
    const box = $("submitted");
    box.replaceChildren();
    if (submitted.length && !failed) {
      // done with these files: a second click must not send them again
      for (const input of form.querySelectorAll("input[type=file]")) input.value = "";
      chosen.files = [];
      chosen.folder = null;
      showChosen(primary);
    }
    if (submitted.length) {
      box.append(el("p", { text: `Submitted ${submitted.length} job${submitted.length > 1 ? "s" : ""}${failed ? `; ${failed} refused (see the messages above)` : ""}:` }),
        el("ul", {}, ...submitted.map((job) => el("li", {}, el("a", { href: `/jobs/${job.id}`, text: job.id }),
          ` ${inputNames(job)}${job.label ? ` (${job.label})` : ""}: `, statusBadge(job, false)))));
      // the outcome is read out where the keyboard now is, next to the links to the new jobs
      box.focus();
      refreshJobs();
    } else {
      const invalid = form.querySelector("[aria-invalid=true]");
      if (invalid) invalid.focus();
    }
  }

  // ---- the job list ------------------------------------------------------------------------

  const listState = { cursors: [null], page: 0, filters: {}, timer: null };

  // The status as a badge; in the job list a running job's progress bar goes with it.
  function statusBadge(job, withProgress = true) {
    const badge = el("span", { class: `status status-${job.status}`, text: job.status });
    if (withProgress && job.status === "running") {
      return el("span", { class: "status-cell" }, badge,
        el("progress", { max: 1, value: job.progress, "aria-label": `progress of job ${job.id}` }),
        el("span", { text: ` ${Math.round(job.progress * 100)} %` }));
    }
    return badge;
  }

  // The files a job was given, by the names they had when uploaded (empty for older jobs).
  function inputNames(job) {
    return Object.values(job.input_names || {}).join(", ");
  }

  function jobRow(job) {
    return el("tr", { "data-job": job.id },
      el("td", { "data-label": "Job" }, el("a", { href: `/jobs/${job.id}`, text: job.id })),
      el("td", { "data-label": "Input", text: inputNames(job) }),
      el("td", { "data-label": "Kind", text: job.kind }),
      el("td", { "data-label": "Label", text: job.label || "" }),
      el("td", { "data-label": "Status" }, statusBadge(job)),
      el("td", { "data-label": "Created" }, formatTime(job.created_at)));
  }

  // Rows are replaced only when a job changed, so keyboard focus in the table survives polls.
  function renderJobs(jobs) {
    const body = $("job-rows");
    const old = new Map([...body.rows].map((row) => [row.dataset.job, row]));
    const rows = jobs.map((job) => {
      const signature = `${job.status}|${job.progress}|${job.label}`;
      const row = old.get(job.id);
      if (row && row.dataset.signature === signature) return row;
      const fresh = jobRow(job);
      fresh.dataset.signature = signature;
      return fresh;
    });
    const same = rows.length === body.rows.length && rows.every((row, i) => row === body.rows[i]);
    if (!same) body.replaceChildren(...rows);
    $("no-jobs").hidden = jobs.length > 0;
  }

  async function refreshJobs() {
    clearTimeout(listState.timer);
    listState.generation = (listState.generation || 0) + 1;
    const generation = listState.generation;
    const query = new URLSearchParams({ limit: PAGE_SIZE });
    for (const [name, value] of Object.entries(listState.filters)) if (value) query.set(name, value);
    const cursor = listState.cursors[listState.page];
    if (cursor) query.set("cursor", cursor);
    try {
      const page = await api("GET", `/v1/jobs?${query}`);
      if (generation !== listState.generation) return; // a newer refresh (new filter, page) won
      $("err-jobs").textContent = "";
      renderJobs(page.jobs);
      listState.cursors[listState.page + 1] = page.next_cursor;
      $("older").disabled = !page.next_cursor;
      $("newer").disabled = listState.page === 0;
    } catch (error) {
      if (generation !== listState.generation) return;
      $("err-jobs").textContent = error.message;
    }
    listState.timer = setTimeout(refreshJobs, POLL_MS * 2);
  }

  function setUpJobList() {
    $("filters").addEventListener("submit", (event) => {
      event.preventDefault();
      const label = $("filter-label").value.trim();
      listState.filters = { label, status: $("filter-status").value };
      listState.cursors = [null];
      listState.page = 0;
      // no paging until this listing's first page (and its cursor) has come
      $("older").disabled = true;
      $("newer").disabled = true;
      const zip = $("batch-zip");
      zip.hidden = !label;
      if (label) zip.replaceWith(downloadLink(`/v1/jobs/results.zip?${new URLSearchParams({ label })}`,
        `${label}.zip`, `Download batch “${label}” (zip)`, { id: "batch-zip", class: "button" }));
      refreshJobs();
    });
    $("older").addEventListener("click", () => {
      if (!listState.cursors[listState.page + 1]) return; // this page's listing has not come yet
      listState.page += 1;
      refreshJobs();
    });
    $("newer").addEventListener("click", () => { listState.page = Math.max(0, listState.page - 1); refreshJobs(); });
  }

  // ---- one job ---------------------------------------------------------------------------

  function facts(list, pairs) {
    list.replaceChildren(...pairs.flatMap(([term, value]) => [el("dt", { text: term }), el("dd", {}, value)]));
  }

  const shownImages = new Set();

  async function showImage(jobId, result) {
    if (shownImages.has(result.name)) return;
    shownImages.add(result.name);
    const figure = el("figure", {});
    $("images").append(figure);
    try {
      const img = el("img", { alt: `${result.name} (result image of job ${jobId})` });
      img.src = URL.createObjectURL(await fetchBlob(localPath(result.url)));
      figure.append(img, el("figcaption", { text: result.name }));
    } catch (error) {
      figure.append(el("figcaption", { text: `${result.name}: ${error.message}` }));
    }
  }

  // A parameter as the submit form takes it: a list as comma-separated values.
  function paramText(value) {
    if (Array.isArray(value)) return value.length ? value.map(paramText).join(", ") : "—";
    return typeof value === "string" ? value : JSON.stringify(value);
  }

  function renderJob(job) {
    $("job-id").textContent = job.id;
    document.title = `Job ${job.label ? `${job.label} ` : ""}${job.status} · fibertensor`;
    facts($("job-facts"), [
      ["Kind", job.kind],
      ...Object.entries(job.input_names || {}).map(([slot, name]) => [`Input ${slot}`, name]),
      ["Label", job.label || "—"],
      ["Status", statusBadge(job, false)],
    ]);
    $("job-progress").value = job.progress;
    $("job-progress-text").textContent = `${Math.round(job.progress * 100)} %`;
    const finished = TERMINAL.has(job.status);
    $("cancel-job").hidden = finished;
    $("delete-job").hidden = !finished;
    $("error-section").hidden = !job.error;
    if (job.error) {
      $("job-error-title").textContent = job.error.title;
      $("job-error-detail").textContent = job.error.detail;
    }
    const params = Object.entries(job.params).map(([k, v]) => [k, paramText(v)]);
    facts($("job-params"), params.length ? params : [["(none)", "this job kind takes no parameters"]]);
    const timings = [["Created", formatTime(job.created_at)], ["Started", formatTime(job.started_at)], ["Finished", formatTime(job.finished_at)]];
    if (job.started_at) timings.push(["Waited in queue", formatSeconds(job.created_at, job.started_at)]);
    if (job.started_at && job.finished_at) timings.push(["Ran for", formatSeconds(job.started_at, job.finished_at)]);
    facts($("job-timings"), timings);
    $("no-results").hidden = job.results.length > 0;
    const list = $("results");
    if (list.children.length !== job.results.length) {
      list.replaceChildren(...job.results.map((r) => el("li", {},
        downloadLink(localPath(r.url), r.name, r.name),
        el("span", { class: "meta", text: ` ${formatBytes(r.bytes)}, sha256 ${r.sha256.slice(0, 12)}…` }))));
      for (const r of job.results) if (IMAGE_NAME.test(r.name)) showImage(job.id, r);
    }
    if (job.results.length && $("job-zip").hidden) {
      $("job-zip").replaceWith(downloadLink(`/v1/jobs/${encodeURIComponent(job.id)}/results.zip`, `${job.label ? `${job.label}-` : ""}${job.id}.zip`,
        "Download all (zip)", { id: "job-zip", class: "button" }));
    }
  }

  // The job's log, kept scrolled to its end unless the reader scrolled up. New lines are
  // appended, so a screen reader announces just those (the element is a live "log").
  async function showLog(jobId) {
    const text = await (await send("GET", `/v1/jobs/${encodeURIComponent(jobId)}/log`)).text();
    const log = $("job-log");
    const shown = log.textContent;
    if (text === shown) return;
    const atEnd = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
    if (shown && text.startsWith(shown)) log.append(text.slice(shown.length));
    else log.textContent = text;
    log.hidden = !text;
    $("no-log").hidden = Boolean(text);
    if (atEnd) log.scrollTop = log.scrollHeight;
  }

  async function showJob(jobId) {
    let previous = null;
    const poll = async () => {
      let job;
      try {
        job = await api("GET", `/v1/jobs/${encodeURIComponent(jobId)}`);
        await showLog(jobId);
      } catch (error) {
        $("err-job").textContent = error.message;
        return;
      }
      renderJob(job);
      if (previous && previous !== job.status) announce(`Job ${job.status}`);
      previous = job.status;
      if (!TERMINAL.has(job.status)) setTimeout(poll, POLL_MS);
      // the runner logs a success just after recording it: read the log's last line once more
      else setTimeout(() => showLog(jobId).catch((error) => { $("err-job").textContent = error.message; }), POLL_MS);
    };
    $("job-id").textContent = jobId;
    $("cancel-job").addEventListener("click", async () => {
      try {
        await api("DELETE", `/v1/jobs/${encodeURIComponent(jobId)}`);
        announce("Cancellation requested");
      } catch (error) {
        $("err-job").textContent = error.message;
      }
    });
    $("delete-job").addEventListener("click", async () => {
      if (!window.confirm("Delete this job and its result files? This cannot be undone.")) return;
      try {
        await api("DELETE", `/v1/jobs/${encodeURIComponent(jobId)}`);
        location.assign("/");
      } catch (error) {
        $("err-job").textContent = error.message;
      }
    });
    await poll();
  }

  // ---- start ---------------------------------------------------------------------------------

  async function start() {
    setUpAuthForm();
    window.addEventListener("dragover", (event) => event.preventDefault());
    window.addEventListener("drop", (event) => event.preventDefault());
    // one authenticated request first: it tells whether a key is needed and whether it works
    await api("GET", "/v1/jobs?limit=1");
    $("forget-key").hidden = !sessionStorage.getItem(KEY_STORAGE);
    $("main").hidden = false;
    if (document.body.dataset.view === "job") await showJob(document.body.dataset.jobId);
    else await showIndex();
  }

  async function showIndex() {
    const doc = await (await fetch("/openapi.json")).json();
    const kinds = kindsFrom(doc);
    const select = $("kind");
    select.replaceChildren(...kinds.map((k) => el("option", { value: k.name, text: k.name })));
    const current = () => kinds.find((k) => k.name === select.value);
    select.addEventListener("change", () => renderKindForm(current()));
    if (kinds.length) renderKindForm(current());
    $("submit-form").addEventListener("submit", (event) => {
      event.preventDefault();
      submitJobs(current(), event.target);
    });
    setUpJobList();
    refreshJobs();
  }

  document.addEventListener("DOMContentLoaded", () => {
    start().catch((error) => {
      $("main").hidden = false;
      const box = $("err-job") || $("err-form");
      if (box) box.textContent = `The page could not start: ${error.message}`;
    }).finally(() => {
      document.body.dataset.ready = "true"; // every handler is in place (tests wait for this)
    });
  });
})();
