// Headless Chromium for the web UI suites (web_ui.test.mjs, web_device.test.mjs): Debian's
// chromium, never a downloaded browser, driven by playwright-core in a profile of its own
// (userDataDir), with no background traffic of its own to disturb what a suite counts.
import { chromium } from 'playwright-core';

export function launchChromium(executablePath, userDataDir, viewport) {
    return chromium.launchPersistentContext(userDataDir, {
        executablePath,
        headless: true,
        timeout: 60000,
        viewport,
        args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
            '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
}
