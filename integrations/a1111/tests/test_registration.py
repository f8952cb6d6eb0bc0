"""What the extension registers in AUTOMATIC1111 (A1111's stand-ins), and what it says."""

import importlib

import pytest


@pytest.fixture
def registration(webui):
    return importlib.import_module("hipdiffusion_a1111.registration")


def test_a1111_gets_an_optimization_an_sd_unet_option_and_a_settings_section(webui, registration):
    assert not registration.on_forge()
    registration.register()
    assert sorted(webui.callbacks) == ["list_optimizers", "list_unets", "ui_settings"]
    optimizers, unets = [], []
    webui.callbacks["list_optimizers"][0](optimizers)
    webui.callbacks["list_unets"][0](unets)
    assert [o.name for o in optimizers] == ["hipDiffusion"]
    assert [u.label for u in unets] == ["hipDiffusion"]


def test_status_says_where_to_select(registration):
    text = registration.status_html()
    assert "Cross attention optimization" in text and "SD Unet" in text and "kernels" in text


def test_without_the_package_nothing_but_the_status_is_registered(webui, registration, monkeypatch):
    monkeypatch.setattr(registration, "package_unavailable", lambda: "the hipdiffusion package does not import")
    registration.register()
    assert list(webui.callbacks) == ["ui_settings"]
    assert "hipDiffusion is off" in registration.status_html()
