import { render } from 'preact';
import 'uplot/dist/uPlot.min.css';
import './style.css';
import { App } from './app.jsx';

render(<App />, document.getElementById('app'));
