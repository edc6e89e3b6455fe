"""The viewer in a real browser: Debian's headless Chromium driven by Selenium (both installed by
the Makefile's test target). Pages are loaded from a live server; screenshots are checked for
what they must show."""

from __future__ import annotations

import json
import os
import shutil
import urllib.request
from pathlib import Path

import cv2
import numpy as np
import pytest

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
    pytest.skip("needs Debian's chromium and chromium-driver (`make test` installs them)", allow_module_level=True)
webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

WIDTH, HEIGHT = 1280, 1600
pytestmark = [pytest.mark.xdist_group("viewer-browser"), pytest.mark.browser]  # one Chromium per run, one worker


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = CHROMIUM
    profile = tmp_path_factory.mktemp("chromium-profile")
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", f"--user-data-dir={profile}", f"--window-size={WIDTH},{HEIGHT}",
                 "--force-device-scale-factor=1"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


def _ids(url: str) -> dict[tuple[str, str], str]:
    caches = json.loads(urllib.request.urlopen(url + "/api/caches").read())
    return {(c["name"], c["config"]): c["id"] for c in caches}


def _rows_loaded(driver, first_index: int):
    WebDriverWait(driver, 30).until(lambda d: d.execute_script(  # one atomic look: the table is redrawn meanwhile
        "const r=document.querySelector('tr.row');return r!==null&&r.dataset.index===arguments[0];", str(first_index)))


def _images_loaded(driver, selector: str) -> list[int]:
    WebDriverWait(driver, 30).until(lambda d: d.execute_script(
        "const i=[...document.querySelectorAll(arguments[0])];return i.length>0&&i.every(x=>x.complete);", selector))
    return driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map(x=>x.naturalWidth);", selector)


def _screenshot(driver, path: Path) -> np.ndarray:
    png = driver.get_screenshot_as_png()
    path.write_bytes(png)
    return cv2.cvtColor(cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)


def _crop(shot: np.ndarray, element) -> np.ndarray:
    r = element.rect
    x, y, w, h = (round(r[k]) for k in ("x", "y", "width", "height"))
    return shot[y:y + h, x:x + w]


def test_the_list_page_shows_every_cache(viewer, browser):
    url, _, made = viewer
    browser.get(url + "/")
    WebDriverWait(browser, 30).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#caches tr[data-id]")) == 5)
    cells = {tuple(td.text for td in tr.find_elements(By.TAG_NAME, "td")[:5])
             for tr in browser.find_elements(By.CSS_SELECTOR, "#caches tr[data-id]")}
    assert ("digits", "default", "train", "arrow_shards", f"{len(made['digits']):,}") in cells
    assert ("sft", "default", "train", "parquet_shards", "5") in cells
    browser.find_element(By.LINK_TEXT, "digits").click()
    _rows_loaded(browser, 0)
    assert browser.current_url == f"{url}/caches/{_ids(url)[('digits', 'default')]}"


def test_image_rows_show_their_thumbnails(viewer, browser, tmp_path):
    url, _, made = viewer
    browser.get(f"{url}/caches/{_ids(url)[('digits', 'default')]}")
    _rows_loaded(browser, 0)
    widths = _images_loaded(browser, "img.thumb")
    assert widths == [8] * 20  # twenty 8x8 digits, every one loaded
    card = browser.find_element(By.ID, "card").text  # the dataset's card, from its builder's info
    assert made["digits"].info.description.split("\n")[0] in card
    WebDriverWait(browser, 30).until(lambda d: "statistics of all" in d.find_element(By.ID, "stats").text)
    shot = _screenshot(browser, tmp_path / "digits.png")
    first = browser.find_elements(By.CSS_SELECTOR, "img.thumb")[0]
    picture = _crop(shot, first)
    assert picture.shape[:2] == (64 + 2, 64 + 2)  # 64 px wide, square, with its 1 px border
    expected = cv2.resize(made["digits"][0]["image"], (64, 64), interpolation=cv2.INTER_NEAREST)
    inner = picture[1:-1, 1:-1].astype(int)
    assert np.abs(inner - expected).mean() < 8  # the digit itself, drawn pixel for pixel


def test_a_video_row_shows_a_strip_of_its_window(viewer, browser, tmp_path):
    url, _, _ = viewer
    browser.get(f"{url}/caches/{_ids(url)[('moving_digits', 'frames')]}")
    _rows_loaded(browser, 0)
    widths = _images_loaded(browser, "img.strip")
    assert widths == [8 * 96 + 7 * 2] * 6  # 6 windows of 8 frames each
    shot = _screenshot(browser, tmp_path / "video.png")
    strip = _crop(shot, browser.find_elements(By.CSS_SELECTOR, "img.strip")[0])[1:-1, 1:-1]
    frame_width = strip.shape[1] * 96 // (8 * 96 + 14)
    frames = [strip[:, round(i * strip.shape[1] / 8):round(i * strip.shape[1] / 8) + frame_width - 2]
              for i in range(8)]
    assert all(f.max() > 100 for f in frames)  # a bright digit in every frame
    assert not all(np.array_equal(frames[0], f) for f in frames[1:])  # and they move


def test_a_pack_shows_its_sequences_and_loss_mask(viewer, browser, tmp_path):
    url, _, made = viewer
    browser.get(f"{url}/caches/{_ids(url)[('sft', 'default')]}")
    _rows_loaded(browser, 0)
    bar = browser.find_elements(By.CSS_SELECTOR, ".pack")[0]
    sequences = bar.find_elements(By.CSS_SELECTOR, ".seq")
    assert len(sequences) == len(made["packs"][0]["seq_start_id"])
    shot = _screenshot(browser, tmp_path / "pack.png")
    pixels = _crop(shot, bar)[2:-2, 2:-2].reshape(-1, 3).astype(int)

    def share(color):
        return float((np.abs(pixels - color).sum(axis=1) < 30).mean())

    row = made["packs"][0]
    mask = np.asarray(row["loss_mask"]) != 0
    assert share((220, 40, 40)) == pytest.approx(mask.mean(), abs=0.06)  # the loss mask, shaded red
    assert share((170, 200, 255)) > 0.1 and share((255, 230, 150)) > 0.1  # sequences alternate colours
    assert share((0, 0, 0)) > 0.01  # their boundaries
    texts = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "tr.row pre")][:2]
    assert texts[0].startswith("[0-") and "What is" in texts[0]


def test_paging_and_jumping(viewer, browser):
    url, _, made = viewer
    browser.get(f"{url}/caches/{_ids(url)[('digits', 'default')]}")
    _rows_loaded(browser, 0)
    browser.find_element(By.ID, "next").click()
    _rows_loaded(browser, 20)
    browser.find_element(By.ID, "prev").click()
    _rows_loaded(browser, 0)
    box = browser.find_element(By.ID, "to")
    box.send_keys("1000")
    box.submit()
    _rows_loaded(browser, 1000)
    total = len(made["digits"])
    assert browser.find_element(By.ID, "status").text == f"rows 1000-1019 of {total}"
    labels = [tr.find_elements(By.TAG_NAME, "td")[1].text for tr in browser.find_elements(By.CSS_SELECTOR, "tr.row")]
    assert labels[0].split(" ")[0] == str(made["digits"][1000]["label"])
    box = browser.find_element(By.ID, "to")
    box.clear()
    box.send_keys(str(total + 5))
    box.submit()
    WebDriverWait(browser, 30).until(lambda d: "past the end" in d.find_element(By.ID, "status").text)
    assert browser.find_element(By.ID, "status").get_attribute("class") == "err"


def _listed(driver) -> list[tuple[str, ...]]:
    return [tuple(td.text for td in tr.find_elements(By.TAG_NAME, "td"))
            for tr in driver.find_elements(By.CSS_SELECTOR, "#caches tr[data-id]")]


def test_the_cache_list_searches_filters_and_sorts_and_keeps_it_in_the_url(viewer, browser):
    url, _, _ = viewer
    browser.get(url + "/?q=moving")  # a link to a search shows that search
    WebDriverWait(browser, 30).until(lambda d: len(_listed(d)) == 2)
    assert {row[1] for row in _listed(browser)} == {"path", "frames"}
    assert browser.find_element(By.ID, "count").text == "2 of 5 caches"
    box = browser.find_element(By.ID, "search")
    box.clear()
    box.send_keys("chat.jsonl")  # the inputs column names the files read, so a file name finds its cache
    WebDriverWait(browser, 30).until(lambda d: len(_listed(d)) == 1)
    assert _listed(browser)[0][:2] == ("sft", "default") and _listed(browser)[0][8] == "chat.jsonl"
    assert browser.current_url == url + "/?q=chat.jsonl"
    box.clear()
    box.send_keys(" ")
    box.send_keys("\b")
    WebDriverWait(browser, 30).until(lambda d: len(_listed(d)) == 5)
    rows = browser.find_element(By.CSS_SELECTOR, "th[data-sort='rows']")
    rows.click()
    WebDriverWait(browser, 30).until(lambda d: "sort=rows" in d.current_url)
    counts = [int(row[4].replace(",", "")) for row in _listed(browser)]
    assert counts == sorted(counts) and len(set(counts)) > 1
    browser.find_element(By.CSS_SELECTOR, "th[data-sort='rows']").click()
    WebDriverWait(browser, 30).until(lambda d: "desc=1" in d.current_url)
    assert [int(row[4].replace(",", "")) for row in _listed(browser)] == sorted(counts, reverse=True)
    browser.get(url + "/?status=superseded")  # the status filter, from the URL: no cache here is superseded
    WebDriverWait(browser, 30).until(lambda d: d.find_element(By.ID, "count").text == "0 of 5 caches")
    assert _listed(browser) == []
    browser.get(url + "/?status=current&sort=name")
    WebDriverWait(browser, 30).until(lambda d: len(_listed(d)) == 5)
    assert [row[0] for row in _listed(browser)] == sorted(row[0] for row in _listed(browser))
    assert browser.find_element(By.ID, "status-filter").get_attribute("value") == "current"


def test_the_row_page_is_in_the_url(viewer, browser):
    url, _, _ = viewer
    page = f"{url}/caches/{_ids(url)[('digits', 'default')]}"
    browser.get(page + "?offset=1000")  # a link to a page of rows opens there
    _rows_loaded(browser, 1000)
    browser.find_element(By.ID, "next").click()
    _rows_loaded(browser, 1020)
    assert browser.current_url == page + "?offset=1020"
    browser.find_element(By.ID, "prev").click()
    browser.find_element(By.ID, "prev").click()
    _rows_loaded(browser, 980)
    assert browser.current_url == page + "?offset=980"
    browser.refresh()
    _rows_loaded(browser, 980)
