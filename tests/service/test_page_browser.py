"""The web page, driven in a real headless Chromium (Debian's ``chromium`` and
``chromium-driver``) by Selenium, against a real ``fibertensor serve`` on 127.0.0.1.

Every number the page shows is checked against the API's own answer for the same request:
the error text is the problem's ``detail``, a downloaded file has the bytes the API serves.
Screenshots of the main states go to ``FIBERTENSOR_SCREENSHOTS`` (default: a temporary
folder); look at them after a change to the page.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import threading
import time
import zipfile
import zlib
from enum import Enum
from pathlib import Path

import httpx
import pytest
from pydantic import BaseModel, Field

from service.app import create_app
from service.settings import Settings
from tests.integration.processes import REPO, free_port, serve_in_thread, service_env, start_serve, stop, wait_for
from worker.job_kinds import InputSlot, JobContext, JobKind
from worker.job_runner import run_job
from worker.job_store import JobStore

pytestmark = pytest.mark.requires_chromium  # skips without it, fails in CI (tests/conftest.py)

KEY_A, KEY_B = "key-of-lab-a-0123456789", "key-of-lab-b-9876543210"
HOSTILE_LABEL = "<script>window.__xss=1</script>\"quoted\" 'single' &amp;"
HOSTILE_NAME = "<img src=x onerror=window.__xss=2>\"'.nii.gz"
JOB_SECONDS = 300  # a cold CPU peaks job compiles its numba kernels first


# ---- servers ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> dict[str, Path]:
    """``fibertensor sample`` (small grid), as a user would generate it."""
    folder = tmp_path_factory.mktemp("sample")
    subprocess.run([sys.executable, "-m", "service", "sample", str(folder), "--shape", "8", "8", "4"],
                   cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)), check=True, capture_output=True)
    return {"fod": folder / "fod.nii.gz", "mask": folder / "mask.nii.gz"}


def _serve(tmp_path_factory, name: str, **settings: object):
    folder = tmp_path_factory.mktemp(name)
    port = free_port()
    proc = start_serve(service_env(folder / "data", **settings), folder / "serve.log", port)
    return proc, f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    proc, base = _serve(tmp_path_factory, "serve")
    yield base
    stop(proc, timeout=60)


@pytest.fixture(scope="module")
def keyed_server(tmp_path_factory):
    proc, base = _serve(tmp_path_factory, "serve-keys", api_keys=f"{KEY_A}=lab-a,{KEY_B}=lab-b")
    yield base
    stop(proc, timeout=60)


# A job kind that stops half way until the test lets it draw its picture, so the page is
# watched while a job runs. It runs in-process (no worker knows this kind).
PICTURE_SIZE = (40, 24)


def _png(width: int, height: int) -> bytes:
    """An RGB gradient as a PNG (zlib-compressed scanlines, filter 0)."""
    rows = b"".join(b"\x00" + bytes(v for x in range(width) for v in (x * 255 // (width - 1), y * 255 // (height - 1), 128))
                    for y in range(height))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


class Palette(str, Enum):
    gray = "gray"
    hot = "hot"


class PictureParams(BaseModel):
    """An Enum (a $ref into $defs in the schema) and a bool: form widgets the real kinds lack."""

    palette: Palette = Field(Palette.hot, description="colour map")
    border: bool = Field(False, description="draw a frame")


DRAW = threading.Event()  # the picture job runs half way, then waits for the test to set this


def _draw(ctx: JobContext) -> list[Path]:
    ctx.progress(0.5)
    ctx.log("half drawn")
    DRAW.wait(60)
    path = ctx.out_dir / "qc.png"
    path.write_bytes(_png(*PICTURE_SIZE))
    return [path]


PICTURE = JobKind(name="picture", summary="Draw a QC picture (test job kind)", params_model=PictureParams,
                  inputs=(InputSlot("volume", True, (".nii", ".nii.gz"), "any volume"),),
                  validate=lambda inputs, params: None, run=_draw)


@pytest.fixture(scope="module")
def picture_server(tmp_path_factory):
    """The API in-process with the picture kind; returns its URL and its job store."""
    settings = Settings(data_dir=tmp_path_factory.mktemp("picture") / "data")
    with serve_in_thread(create_app(settings, kinds={"picture": PICTURE})) as base:
        yield base, JobStore(settings.data_dir)


# ---- the browser -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    folder = os.environ.get("FIBERTENSOR_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        return Path(folder)
    return tmp_path_factory.mktemp("screenshots")


class Page:
    """A Chromium tab with the waits and reads these tests need."""

    def __init__(self, driver, base: str, downloads: Path, shots: Path):
        self.driver, self.base, self.downloads, self.shots = driver, base, downloads, shots

    def open(self, path: str) -> None:
        self.driver.get(self.base + path)
        # the page is ready once its script has set every handler, or asks for a key
        self.wait(lambda: self.js("return document.body && (document.body.dataset.ready === 'true'"
                                  " || !document.getElementById('auth').hidden)"), 30, f"{path} to be ready")

    def js(self, script: str, *args):
        return self.driver.execute_script(script, *args)

    def wait(self, predicate, timeout: float = 30, what: str = "the page"):
        return wait_for(predicate, timeout, what, interval=0.2)

    def by_id(self, element_id: str):
        from selenium.webdriver.common.by import By

        return self.driver.find_element(By.ID, element_id)

    def all(self, selector: str):
        from selenium.webdriver.common.by import By

        return self.driver.find_elements(By.CSS_SELECTOR, selector)

    def texts(self, selector: str) -> list[str]:
        """Text of every match, read at one instant (polling replaces rows under Selenium)."""
        return self.js("return [...document.querySelectorAll(arguments[0])].map(e => e.textContent)", selector)

    def text(self, element_id: str) -> str:
        return self.js("const e = document.getElementById(arguments[0]); return e ? e.textContent : null", element_id)

    def visible(self, element_id: str) -> bool:
        return self.by_id(element_id).is_displayed()

    def viewport(self, width: int | None = None, height: int | None = None, zoom: float = 1.0) -> None:
        """Emulate a window of this many CSS pixels (a phone below 500) at this zoom (device
        pixels per CSS pixel, as the browser's zoom sets it); none: the real window."""
        self.size = (width, height, zoom) if width else None
        if width:
            self.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                        {"width": width, "height": height, "deviceScaleFactor": zoom, "mobile": width < 500})
        else:
            self.driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})

    def shot(self, name: str) -> Path:
        """A screenshot of the whole page: the viewport grown to the page's height, then back."""
        size = getattr(self, "size", None)
        width = self.js("return window.innerWidth")
        self.viewport(width, self.js("return document.documentElement.scrollHeight"), size[2] if size else 1.0)
        path = self.shots / f"{name}.png"
        self.driver.save_screenshot(str(path))
        self.viewport(*(size or ()))
        return path

    def console_errors(self, allowed_statuses: tuple[int, ...] = ()) -> list[str]:
        """SEVERE browser log entries, less the failed requests a test provoked on purpose."""
        allowed = tuple(f"the server responded with a status of {s}" for s in allowed_statuses)
        return [e["message"] for e in self.driver.get_log("browser")
                if e["level"] == "SEVERE" and not any(a in e["message"] for a in allowed)]

    def upload_and_submit(self, files: dict[str, list[Path]], fields: dict[str, str]) -> None:
        from selenium.webdriver.support.ui import Select

        self.wait(lambda: self.all("#kind-fields .field"), 30, "the submit form")
        for slot, paths in files.items():
            self.by_id(f"f-{slot}").send_keys("\n".join(str(p) for p in paths))
        for name, value in fields.items():
            element = self.by_id(f"f-{name}")
            if element.tag_name == "select":
                Select(element).select_by_value(value)
            else:
                element.clear()
                element.send_keys(value)
        self.by_id("submit-button").click()

    def wait_submitted(self) -> None:
        self.wait(lambda: self.js("return !document.getElementById('submit-button').disabled")
                  and (self.all("#submitted a") or self.all("#submit-form .error:not(:empty)")), 60, "the upload")

    def downloaded(self, name: str) -> bytes:
        path = self.downloads / name
        self.wait(lambda: path.exists() and not (self.downloads / f"{name}.crdownload").exists(), 30, f"download of {name}")
        return path.read_bytes()


def _driver(width: int, height: int):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={width},{height}"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)


@pytest.fixture
def browser(tmp_path, shots):
    driver = _driver(1280, 800)
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
    pages: list[Page] = []

    def page(base: str) -> Page:
        pages.append(Page(driver, base, downloads, shots))
        return pages[-1]

    yield page
    driver.quit()


def _shown(value) -> str:
    """A parameter as the job page shows it: as JSON in a browser (0.0 as 0), a list as
    comma-separated values (as the form takes it), an empty one as a dash."""
    if isinstance(value, list):
        return ", ".join(map(_shown, value)) or "—"
    if isinstance(value, str):
        return value
    return json.dumps(int(value) if isinstance(value, float) and value.is_integer() else value)


def _served_log(base: str, job_id: str, headers: dict[str, str], page: Page) -> str | None:
    """The job's log from the API when the page shows exactly it, else None."""
    log = httpx.get(f"{base}/v1/jobs/{job_id}/log", headers=headers).text
    return log if log and page.text("job-log") == log else None


def _finished(page: Page) -> str:
    page.wait(lambda: any(s in (page.text("job-facts") or "") for s in ("succeeded", "failed", "cancelled")),
              JOB_SECONDS, "the job to finish on its page")
    return page.text("job-facts")


# ---- tests -----------------------------------------------------------------------------------

def test_sample_from_upload_to_succeeded_and_downloads(server, sample, browser):
    page = browser(server)
    page.open("/")
    page.upload_and_submit({"fod": [sample["fod"]], "mask": [sample["mask"]]}, {"backend": "cpu", "label": "sample run"})
    page.wait_submitted()
    assert page.text("err-form") == "" and page.text("err-fod") == ""
    assert page.js("return document.getElementById('upload-progress').value") == 1.0
    page.shot("submitted")
    job_id = page.all("#submitted a")[0].text
    listed = httpx.get(f"{server}/v1/jobs/{job_id}").json()
    assert (listed["kind"], listed["label"], listed["params"]["backend"]) == ("peaks", "sample run", "cpu")
    # the keyboard is on the outcome: the new job, its input and its status
    assert page.js("return document.activeElement.id") == "submitted"
    assert page.texts("#submitted li") == [f"{job_id} fod.nii.gz, mask.nii.gz (sample run): queued"]
    # the list shows it (newest first, polling), with its inputs' names
    page.wait(lambda: page.all(f"#job-rows tr[data-job='{job_id}']"), 10, "the job in the list")
    assert page.all("#job-rows tr")[0].get_attribute("data-job") == job_id
    assert page.texts(f"#job-rows tr[data-job='{job_id}'] td[data-label=Input]") == ["fod.nii.gz, mask.nii.gz"]

    page.all("#submitted a")[0].click()
    page.wait(lambda: page.text("job-id") == job_id, 10, "the job page")
    assert "succeeded" in _finished(page)
    job = httpx.get(f"{server}/v1/jobs/{job_id}").json()
    assert job["status"] == "succeeded"
    names = [a.text for a in page.all("#results a")]
    assert names == [r["name"] for r in job["results"]]
    assert page.text("job-progress-text") == "100 %"
    assert "Input fodfod.nii.gzInput maskmask.nii.gz" in page.text("job-facts")
    # Delete comes after everything the job page offers to read or download
    controls = page.js("return [...document.querySelectorAll('main a[href], main button, main [tabindex]')]"
                       ".filter(e => e.offsetParent !== null).map(e => e.id || e.textContent)")
    assert controls[-1] == "delete-job" and controls.index("job-zip") < controls.index("delete-job"), controls
    params = dict(zip(page.js("return [...document.querySelectorAll('#job-params dt')].map(e => e.textContent)"),
                      page.js("return [...document.querySelectorAll('#job-params dd')].map(e => e.textContent)")))
    assert params == {k: _shown(v) for k, v in job["params"].items()}
    # the job's log, as the API serves it (its last line is written just after the status)
    log = page.wait(lambda: _served_log(server, job_id, {}, page), 10, "the log as the API serves it")
    assert log.splitlines()[-1].endswith(f"succeeded with {len(job['results'])} result files")
    # the job's QC picture is shown inline, at the size of the PNG the API serves
    qc = next(r for r in job["results"] if r["name"] == "qc.png")
    png = httpx.get(server + qc["url"]).content
    assert hashlib.sha256(png).hexdigest() == qc["sha256"] and png.startswith(b"\x89PNG\r\n\x1a\n")
    page.wait(lambda: page.all("#images img"), 10, "the QC picture")
    [image] = page.all("#images img")
    assert image.get_attribute("alt") == f"qc.png (result image of job {job_id})"
    size = page.wait(lambda: page.js("const i = arguments[0]; return i.complete && i.naturalWidth > 0 && [i.naturalWidth, i.naturalHeight]",
                                     image), 10, "the QC picture to load")
    assert tuple(size) == struct.unpack(">II", png[16:24])  # the PNG's IHDR width and height
    page.shot("job-succeeded")

    # one result, then all of them as a zip: the bytes the API serves
    served = {r["name"]: httpx.get(server + r["url"]).content for r in job["results"]}
    assert {hashlib.sha256(v).hexdigest() for v in served.values()} == {r["sha256"] for r in job["results"]}
    page.all("#results a")[0].click()
    assert page.downloaded("peaks.nii.gz") == served["peaks.nii.gz"]
    page.by_id("job-zip").click()
    with zipfile.ZipFile(io.BytesIO(page.downloaded(f"sample run-{job_id}.zip"))) as archive:
        assert {n: archive.read(n) for n in archive.namelist()} == served
    assert page.console_errors() == []


def test_bad_inputs_show_the_api_message_next_to_the_field(server, sample, browser, tmp_path):
    broken = tmp_path / "broken.nii.gz"
    broken.write_bytes(b"this is not a NIfTI file")
    with open(broken, "rb") as handle:
        expected = httpx.post(f"{server}/v1/jobs/peaks", files={"fod": (broken.name, handle)}).json()
    page = browser(server)
    page.open("/")
    page.upload_and_submit({"fod": [broken]}, {})
    page.wait_submitted()
    assert page.text("err-fod") == expected["detail"]
    assert "not gzip data" in expected["detail"]
    assert page.by_id("f-fod").get_attribute("aria-invalid") == "true"
    assert page.all("#submitted a") == []
    page.shot("bad-file")

    schema = httpx.get(f"{server}/openapi.json").json()["paths"]["/v1/jobs/peaks"]["post"]["requestBody"]
    too_many = str(int(schema["content"]["multipart/form-data"]["schema"]["properties"]["npeaks"]["maximum"]) + 1)
    with open(sample["fod"], "rb") as handle:
        expected = httpx.post(f"{server}/v1/jobs/peaks", files={"fod": ("fod.nii.gz", handle)}, data={"npeaks": too_many}).json()
    page.open("/")
    page.upload_and_submit({"fod": [sample["fod"]]}, {"npeaks": too_many})
    page.wait_submitted()
    [error] = expected["errors"]
    assert page.text("err-npeaks") == f"{error['field']}: {error['message']}"
    assert page.text("err-fod") == ""
    assert page.console_errors(allowed_statuses=(422,)) == []


def test_labels_and_file_names_are_shown_as_text_never_run(server, sample, browser, tmp_path):
    good = tmp_path / "good.nii.gz"
    shutil.copy(sample["fod"], good)
    hostile = tmp_path / HOSTILE_NAME
    hostile.write_bytes(b"not gzip")
    page = browser(server)
    page.open("/")
    page.upload_and_submit({"fod": [good, hostile]}, {"label": HOSTILE_LABEL})
    page.wait_submitted()
    assert HOSTILE_NAME in page.text("chosen-files")
    # the refused file of the batch is named in its error, as text
    # (by the name it was uploaded with, not the one the server stored it under; a form sends
    # a file name's " as %22)
    sent_name = HOSTILE_NAME.replace('"', "%22")
    assert page.text("err-fod").startswith(f"{HOSTILE_NAME}: fod: '{sent_name}' ends in .gz but is not gzip data")
    job_id = page.all("#submitted a")[0].text
    page.wait(lambda: page.all(f"#job-rows tr[data-job='{job_id}']"), 10, "the job in the list")
    assert page.texts(f"#job-rows tr[data-job='{job_id}'] td[data-label=Label]") == [HOSTILE_LABEL]
    page.shot("hostile-label")
    page.open(f"/jobs/{job_id}")
    page.wait(lambda: HOSTILE_LABEL in (page.text("job-facts") or ""), 10, "the label on the job page")
    assert page.js("return window.__xss") is None
    assert page.js("return document.scripts.length") == 1
    assert page.js("return document.querySelectorAll('[onerror]').length") == 0
    assert HOSTILE_LABEL in page.js("return document.title")
    assert page.console_errors(allowed_statuses=(422,)) == []


def test_api_keys_a_wrong_key_is_refused_and_tenants_see_only_their_jobs(keyed_server, sample, browser):
    page = browser(keyed_server)
    page.open("/")
    page.wait(lambda: page.visible("auth"), 10, "the key prompt")
    assert not page.visible("main")
    page.by_id("api-key").send_keys("wrong-key")
    page.by_id("api-key").submit()
    expected = httpx.get(f"{keyed_server}/v1/jobs", headers={"X-API-Key": "wrong-key"}).json()["detail"]
    page.wait(lambda: page.text("err-api-key") == expected, 10, "the refusal")
    assert not page.visible("main")
    assert page.js("return sessionStorage.length") == 0
    page.shot("wrong-key")

    page.by_id("api-key").send_keys(KEY_A)
    page.by_id("api-key").submit()
    page.wait(lambda: page.visible("main") and page.all("#f-fod"), 10, "the page for lab A")
    assert page.js("return sessionStorage.getItem('fibertensor.apiKey')") == KEY_A
    assert page.driver.get_cookies() == [] and KEY_A not in page.driver.current_url
    page.upload_and_submit({"fod": [sample["fod"]]}, {"backend": "cpu", "label": "lab-a-batch"})
    page.wait_submitted()
    a_job = page.all("#submitted a")[0].text
    owner = httpx.get(f"{keyed_server}/v1/jobs/{a_job}", headers={"X-API-Key": KEY_A}).json()
    assert owner["label"] == "lab-a-batch"
    page.wait(lambda: page.all(f"#job-rows tr[data-job='{a_job}']"), 10, "lab A's job in its list")
    # downloads carry the key in a header (fetched, then handed to the browser as a file)
    page.all("#submitted a")[0].click()
    assert "succeeded" in _finished(page)
    job = httpx.get(f"{keyed_server}/v1/jobs/{a_job}", headers={"X-API-Key": KEY_A}).json()
    first = job["results"][0]
    page.all("#results a")[0].click()
    assert hashlib.sha256(page.downloaded(first["name"])).hexdigest() == first["sha256"]
    page.open("/")

    page.by_id("forget-key").click()
    page.wait(lambda: page.visible("auth"), 10, "the key prompt again")
    page.by_id("api-key").send_keys(KEY_B)
    page.by_id("api-key").submit()
    page.wait(lambda: page.visible("main") and page.visible("no-jobs"), 10, "lab B's empty list")
    assert a_job not in page.driver.page_source and "lab-a-batch" not in page.driver.page_source
    page.shot("tenant-b")
    page.open(f"/jobs/{a_job}")
    expected = httpx.get(f"{keyed_server}/v1/jobs/{a_job}", headers={"X-API-Key": KEY_B}).json()["detail"]
    page.wait(lambda: page.text("err-job") == expected, 10, "lab B refused lab A's job")
    assert "lab-a-batch" not in page.driver.page_source and page.text("job-facts") == ""
    assert page.text("job-log") == "" and not page.visible("job-log")
    assert page.console_errors(allowed_statuses=(401, 404)) == []


def test_keyboard_only_and_no_broken_layout_at_desktop_zoom_and_phone_width(server, sample, browser):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    with open(sample["fod"], "rb") as handle:
        job_id = httpx.post(f"{server}/v1/jobs/peaks", files={"fod": ("fod.nii.gz", handle)},
                            data={"backend": "cpu", "label": "keyboard"}).json()["id"]
    page = browser(server)
    page.open("/")
    page.wait(lambda: page.all("#f-fod") and page.all("#job-rows tr"), 30, "the form and the job list")
    reached = []
    for _ in range(60):
        ActionChains(page.driver).send_keys(Keys.TAB).perform()
        reached.append(page.js("const e = document.activeElement; return e.id || e.getAttribute('href') || e.tagName"))
    for control in ("kind", "f-fod", "f-fod-folder", "f-mask", "f-npeaks", "f-backend", "f-label",
                    "submit-button", "filter-label", "filter-status"):
        assert control in reached, f"{control} cannot be reached with the Tab key: {reached}"
    assert f"/jobs/{job_id}" in reached
    # filter by label from the keyboard
    page.by_id("filter-label").send_keys("keyboard", Keys.ENTER)
    page.wait(lambda: page.visible("batch-zip"), 10, "the batch download link")
    page.wait(lambda: page.texts("#job-rows td[data-label=Label]") == ["keyboard"], 10, "the filtered list")
    # the job page's log scrolls from the keyboard too: it takes focus
    page.open(f"/jobs/{job_id}")
    page.wait(lambda: page.visible("job-log"), JOB_SECONDS, "the job's log")
    reached = []
    for _ in range(30):
        ActionChains(page.driver).send_keys(Keys.TAB).perform()
        reached.append(page.js("return document.activeElement.id"))
    assert "job-log" in reached, reached

    # 200 % zoom of a 1280x800 window: 640x400 CSS pixels, each 2 device pixels wide
    for name, width, height, zoom in (("desktop-1280", 1280, 800, 1), ("zoom-200", 640, 400, 2), ("phone-375", 375, 800, 1)):
        page.viewport(width, height, zoom)
        for path in ("/", f"/jobs/{job_id}"):
            page.open(path)
            page.wait(lambda: page.visible("main"), 10, "the page")
            time.sleep(0.5)
            overflow = page.js("return document.documentElement.scrollWidth - document.documentElement.clientWidth")
            assert overflow <= 0, f"{path} is {overflow} px wider than a {width} px window"
            page.shot(f"layout-{name}{'-job' if path != '/' else ''}")
        page.viewport()
    assert page.console_errors() == []


def test_live_progress_pictures_inline_cancel_delete_and_paging(picture_server, sample, browser):
    base, store = picture_server
    page = browser(base)
    page.open("/")
    page.upload_and_submit({"volume": [sample["fod"]]}, {"label": "qc"})
    page.wait_submitted()
    job_id = page.all("#submitted a")[0].text
    page.open(f"/jobs/{job_id}")
    assert "queued" in page.text("job-facts") and page.visible("cancel-job")
    runner = threading.Thread(target=run_job, args=(store, job_id, lambda name: PICTURE), kwargs=dict(
        heartbeat_interval=1.0, heartbeat_timeout=30.0, max_worker_losses=3))
    runner.start()
    try:
        # live, without reloading: the page polls the API
        page.wait(lambda: "running" in page.text("job-facts") and page.text("job-progress-text") == "50 %", 10, "running at 50 %")
        # the log too: the job's own message appears while it runs
        log = page.wait(lambda: "half drawn" in page.text("job-log") and _served_log(base, job_id, {}, page), 10, "the live log")
        assert [line.split(" ", 1)[1] for line in log.splitlines()][1:] == ["half drawn"]
        page.shot("job-running")
    finally:
        DRAW.set()
        runner.join(30)
    page.wait(lambda: "succeeded" in page.text("job-facts"), 10, "succeeded")
    assert not page.visible("cancel-job") and page.visible("delete-job")
    page.wait(lambda: page.text("job-log").endswith("succeeded with 1 result files\n"), 10, "the log's last line")
    page.wait(lambda: page.all("#images img"), 10, "the picture")
    image = page.all("#images img")[0]
    size = page.wait(lambda: page.js("const i = arguments[0]; return i.complete && i.naturalWidth && [i.naturalWidth, i.naturalHeight]", image),
                     10, "the picture to load")
    assert tuple(size) == PICTURE_SIZE
    assert image.get_attribute("alt").startswith("qc.png")
    page.shot("job-picture")

    # 25 more jobs (queued: no worker runs them); the list pages 20 at a time by the API's cursor
    with open(sample["fod"], "rb") as handle:
        data = handle.read()
    for _ in range(25):
        assert httpx.post(f"{base}/v1/jobs/picture", files={"volume": ("v.nii.gz", data)}, data={"label": "many"}).status_code == 202
    first = httpx.get(f"{base}/v1/jobs", params={"label": "many", "limit": 20}).json()
    second = httpx.get(f"{base}/v1/jobs", params={"label": "many", "limit": 20, "cursor": first["next_cursor"]}).json()
    page.open("/")
    page.by_id("filter-label").send_keys("many")
    page.by_id("filter-label").submit()

    def rows() -> list[str]:
        return page.js("return [...document.querySelectorAll('#job-rows tr')].map(row => row.dataset.job)")

    # the filtered listing's first page: its rows, and "older" enabled by its cursor (the
    # unfiltered listing before it can show the same rows)
    page.wait(lambda: rows() == [j["id"] for j in first["jobs"]] and page.js("return !document.getElementById('older').disabled"),
              10, "the first page, newest first")
    page.by_id("older").click()
    page.wait(lambda: rows() == [j["id"] for j in second["jobs"]], 10, "the second page")
    assert len(rows()) == 5 and page.by_id("older").get_attribute("disabled") is not None
    page.by_id("newer").click()
    page.wait(lambda: rows() == [j["id"] for j in first["jobs"]], 10, "the first page again")

    # cancel a queued job, then delete it (after the browser's confirmation)
    queued = second["jobs"][-1]["id"]
    page.open(f"/jobs/{queued}")
    page.by_id("cancel-job").click()
    page.wait(lambda: "cancelled" in page.text("job-facts") and page.visible("delete-job"), 10, "the cancelled job")
    assert httpx.get(f"{base}/v1/jobs/{queued}").json()["status"] == "cancelled"
    page.by_id("delete-job").click()
    page.driver.switch_to.alert.accept()
    page.wait(lambda: page.driver.current_url == f"{base}/", 10, "the list after deleting")
    assert httpx.get(f"{base}/v1/jobs/{queued}").status_code == 404
    assert page.console_errors() == []


def test_a_dropped_file_or_a_chosen_folder_is_a_batch_labelled_with_its_name(server, sample, browser, tmp_path):
    folder = tmp_path / "subj-batch"
    folder.mkdir()
    for name in ("sub-01.nii.gz", "sub-02.nii.gz"):
        shutil.copy(sample["fod"], folder / name)
    (folder / "notes.txt").write_text("not an input")
    page = browser(server)
    page.open("/")
    page.wait(lambda: page.all("#drop-zone"), 30, "the drop zone")
    # a file dropped on the zone (a DataTransfer built in the page: Selenium cannot drag from the desktop)
    page.js("""const data = new DataTransfer();
               data.items.add(new File([new Uint8Array(arguments[0])], 'dropped.nii.gz'));
               document.getElementById('drop-zone').dispatchEvent(new DragEvent('drop', {dataTransfer: data, bubbles: true, cancelable: true}));""",
            list(sample["fod"].read_bytes()))
    page.wait(lambda: "dropped.nii.gz" in page.text("chosen-files"), 10, "the dropped file")
    assert page.text("chosen-files").startswith(f"1 file ({sample['fod'].stat().st_size / 1000:.1f} KB):")

    page.by_id("f-fod-folder").send_keys(str(folder))
    page.wait(lambda: "subj-batch" in page.text("chosen-files"), 10, "the folder")
    assert "2 files, one job each from the folder “subj-batch”" in page.text("chosen-files")
    assert "1 other file(s) left out" in page.text("chosen-files")
    assert page.js("return document.getElementById('f-label').value") == "subj-batch"
    page.upload_and_submit({}, {"backend": "cpu"})
    page.wait_submitted()
    ids = page.texts("#submitted a")
    batch = httpx.get(f"{server}/v1/jobs", params={"label": "subj-batch"}).json()["jobs"]
    assert sorted(ids) == sorted(j["id"] for j in batch) and len(ids) == 2

    def succeeded() -> list[dict] | None:
        jobs = httpx.get(f"{server}/v1/jobs", params={"label": "subj-batch"}).json()["jobs"]
        return jobs if all(j["status"] == "succeeded" for j in jobs) else None

    done = wait_for(succeeded, JOB_SECONDS, "the batch to succeed")
    page.by_id("filter-label").send_keys("subj-batch")
    page.by_id("filter-label").submit()
    page.wait(lambda: page.visible("batch-zip"), 10, "the batch download link")
    page.by_id("batch-zip").click()
    with zipfile.ZipFile(io.BytesIO(page.downloaded("subj-batch.zip"))) as archive:
        members = archive.namelist()
        # a folder per job, named after the file it was given
        assert sorted(j["input_names"]["fod"] for j in done) == ["sub-01.nii.gz", "sub-02.nii.gz"]
        for job in done:
            folder = job["input_names"]["fod"].removesuffix(".nii.gz")
            for result in job["results"]:
                assert hashlib.sha256(archive.read(f"{folder}/{result['name']}")).hexdigest() == result["sha256"]
    assert len(members) == sum(len(j["results"]) for j in done)
    page.shot("batch")
    assert page.console_errors() == []


# For each name in arguments[0]: its input's value, max and accept attributes, its options'
# texts and its help text.
_READ_FIELDS = """
return Object.fromEntries(arguments[0].map(name => {
    const input = document.getElementById('f-' + name), help = document.getElementById('help-' + name);
    return [name, {value: input.value, max: input.getAttribute('max'), accept: input.getAttribute('accept'),
                   options: [...input.querySelectorAll('option')].map(o => o.textContent),
                   help: help ? help.textContent : null}];
}));
"""


@pytest.mark.parametrize("which", ["server", "picture_server"])
def test_every_kind_gets_a_form_from_the_openapi_document(which, request, browser):
    from selenium.webdriver.support.ui import Select

    server = request.getfixturevalue(which)
    server = server[0] if isinstance(server, tuple) else server
    doc = httpx.get(f"{server}/openapi.json").json()
    forms = {path.rsplit("/", 1)[1]: item["post"]["requestBody"]["content"]["multipart/form-data"]["schema"]
             for path, item in doc["paths"].items()
             if "post" in item and "multipart/form-data" in item["post"].get("requestBody", {}).get("content", {})}
    assert {"peaks", "compress", "cp-conv"} <= set(forms) or set(forms) == {"picture"}
    page = browser(server)
    page.open("/")
    assert page.texts("#kind option") == list(forms)
    for kind, schema in forms.items():
        Select(page.by_id("kind")).select_by_value(kind)
        assert page.texts("#kind-fields .field > label") == [
            name + (" (required)" if name in schema.get("required", []) else "") for name in schema["properties"]]
        # every field as the page shows it, read in one script call (a call per attribute
        # made this test the browser's busiest)
        fields = page.js(_READ_FIELDS, list(schema["properties"]))
        for name, prop in schema["properties"].items():
            if "$ref" in prop:
                prop = {**schema["$defs"][prop["$ref"].rsplit("/", 1)[1]], **prop}
            field = fields[name]
            default = prop.get("default")
            if isinstance(default, bool):
                assert field["value"] == json.dumps(default) and field["options"] == ["true", "false"]
            elif isinstance(default, (int, float)):
                assert float(field["value"]) == default, (kind, name)
            elif default is not None:
                assert field["value"] == str(default), (kind, name)
            if "enum" in prop:
                assert field["options"] == prop["enum"], (kind, name)
            if "maximum" in prop:
                assert float(field["max"]) == prop["maximum"], (kind, name)
            if prop.get("format") == "binary":
                assert field["accept"] == ",".join(prop["x-suffixes"]), (kind, name)
            assert prop.get("description", "") in field["help"], (kind, name)
    assert page.console_errors() == []
