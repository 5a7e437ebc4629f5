#!/bin/sh
# Healthy when this container's Celery worker answers a ping through the broker.
exec fibertensor worker --check
