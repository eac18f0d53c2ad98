/** The console's entry: the app shell renders at once; each page's code loads when it is first shown. */
import { render } from 'preact';
import { App } from './app.tsx';
import './styles.css';

render(<App />, document.getElementById('app')!);
