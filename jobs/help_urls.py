from django.urls import path

from jobs import help

urlpatterns = [
    path("help/glossary/", help.glossary, name="help-glossary"),
    path("help/runtime/", help.runtime, name="help-runtime"),
]
