# A Scrapy spider at Scrapy's defaults (only its log kept quiet and its telnet
# console off) that follows every link on a site, for tests/interop/web.sh and
# tests/interop/crawls.sh:
#
#   scrapy runspider tests/interop/spider.py -a site=URL [-a proxies=URL,URL]
#
# Told only the proxy through http_proxy and https_proxy; with `proxies`, each
# request goes through the next of them in turn (a rotating proxy).
import itertools

import scrapy


class Site(scrapy.Spider):
    name = "site"
    custom_settings = {"LOG_LEVEL": "INFO", "TELNETCONSOLE_ENABLED": False}

    def __init__(self, site, proxies="", **kwargs):
        super().__init__(**kwargs)
        self.site = site
        self.proxies = itertools.cycle(proxies.split(",")) if proxies else None

    def via(self):
        return {"proxy": next(self.proxies)} if self.proxies else {}

    async def start(self):
        yield scrapy.Request(self.site + "/", meta=self.via())

    def parse(self, response):
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, self.parse, meta=self.via())
