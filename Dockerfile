FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 OMNIROUTE_DATA_DIR=/data
WORKDIR /app
COPY pyproject.toml README.md ./
COPY omniroute_site omniroute_site
COPY gateway gateway
COPY providers providers
COPY combos combos
COPY telemetry telemetry
COPY templates templates
COPY manage.py ./
RUN pip install --no-cache-dir . && mkdir -p /data \
    && python manage.py collectstatic --noinput -v0 && rm -f /data/secret_key
EXPOSE 8000
CMD ["uvicorn", "omniroute_site.asgi:application", "--host", "0.0.0.0", "--port", "8000", "--lifespan", "on", "--loop", "uvloop", "--http", "omniroute_site.server:GuardedHttpToolsProtocol", "--no-access-log"]
