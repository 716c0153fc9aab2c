"""The WSGI application of every web process: Django's, wrapped so that an answer sent before
the request body was read closes the connection cleanly (rlark_site/earlyanswer.py)."""

import os

from django.core.wsgi import get_wsgi_application

from rlark_site.earlyanswer import CloseAfterEarlyAnswer

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rlark_site.settings")
application = CloseAfterEarlyAnswer(get_wsgi_application())
